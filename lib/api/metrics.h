/* The API's Prometheus exposition (docs/metrics.md): GET /metrics, which nginx
 * passes only from the addresses it allows (agenthost-locations.conf), answered
 * by any worker from the counters every worker shares (core/metrics.h). */
#ifndef AH_API_METRICS_H
#define AH_API_METRICS_H

#include <stdbool.h>

#include "http/http.h"
#include "http/router.h"

/* Whether the request is a scrape: REQUEST_URI /metrics (outside /api/v1)
 * through nginx's metrics location, which sets AGENTHOST_METRICS. */
bool ah_api_metrics_asked(ah_req *r);
/* Answers the scrape. */
int ah_api_metrics_reply(ah_req *r, const ah_route *const *routes);
/* Counts an answered request under its route row (NULL: unmatched). */
void ah_api_metrics_count(const ah_route *const *routes, const ah_route *rt, int status,
                          int64_t elapsed_us);

#endif
