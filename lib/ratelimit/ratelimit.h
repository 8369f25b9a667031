/* Fixed one-minute windows counted in MariaDB, so the limit holds across every
 * worker on every API host that shares the database. */
#ifndef AH_RATELIMIT_RATELIMIT_H
#define AH_RATELIMIT_RATELIMIT_H

#include <stdbool.h>

#include "http/http.h"

/* Counts this request for subject in class ('c' CRUD, 'i' invoke) and fills
 * r->rate. *over is true when the request exceeds the limit. */
int ah_ratelimit_hit(ah_req *r, const char *subject, char cls, long long limit, bool *over);

/* Deletes windows that ended; called now and then by the workers. */
void ah_ratelimit_prune(ah_db *db);

#endif
