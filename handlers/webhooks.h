/* Webhooks on the API's side (issue 28): the webhook_url field of a call and
 * of an agent, and the enqueue of a finished call's record. The sending is
 * agenthost-webhooks' (lib/webhooks). */
#ifndef AH_HANDLERS_WEBHOOKS_H
#define AH_HANDLERS_WEBHOOKS_H

#include <stdbool.h>

#include "http/http.h"

/* Reads the optional, nullable "webhook_url" of body o into *out (*has: it
 * was present), adding a 422 entry for a URL the rules refuse (webhooks.h)
 * or when the user has no signing secret yet. */
void ah_webhook_url_field(ah_req *r, json_object *o, const char **out, bool *has);

/* Queues record (the finished call's JSON, as its caller received it) for
 * url; a failure is logged, never the call's. */
void ah_webhook_queue(ah_req *r, const char *agent_id, const char *inv_id, const char *url,
                      json_object *record);

#endif
