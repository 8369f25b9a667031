/* Fixed one-minute windows counted in MariaDB, so the limit holds across every
 * worker on every API host that shares the database. Each host hands out the
 * tokens it reserved from the database through a table in shared memory (see
 * lease.h), so a busy user costs a database write per chunk, not per request. */
#ifndef AH_RATELIMIT_RATELIMIT_H
#define AH_RATELIMIT_RATELIMIT_H

#include <stdbool.h>

#include "http/http.h"

/* Creates the host's shared table; call in the master before forking workers.
 * Without it (or if it fails) every request is counted in the database. */
int ah_ratelimit_init(unsigned nslots);

/* Counts this request for subject in class ('c' CRUD, 'i' invoke) and fills
 * r->rate. *over is true when the request exceeds the limit. */
int ah_ratelimit_hit(ah_req *r, const char *subject, char cls, long long limit, bool *over);

/* Fills r->rate for a route that is not counted (/health): the headers every
 * response carries, from this host's view of the window, costing no token and
 * no database call. */
void ah_ratelimit_peek(ah_req *r, const char *subject, char cls, long long limit);

/* Work deferred until the response is out: refills a pool that runs low.
 * Called by the worker between requests. */
void ah_ratelimit_idle(ah_db *db);

/* Deletes windows that ended; called now and then by the workers. */
void ah_ratelimit_prune(ah_db *db);

#endif
