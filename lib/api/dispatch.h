/* Handling of one accepted FastCGI request. */
#ifndef AH_API_DISPATCH_H
#define AH_API_DISPATCH_H

#include "http/http.h"
#include "http/router.h"

/* r has arena, fcgi, db and cfg set; everything else is filled here. The
 * request is matched against routes (NULL-terminated list of tables). */
void ah_dispatch(ah_req *r, const ah_route *const *routes);
/* The metrics worker's: a scrape (api/metrics.h) or 404, without r->db. */
void ah_dispatch_metrics(ah_req *r, const ah_route *const *routes);

#endif
