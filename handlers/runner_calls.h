/* The handlers' calls to a runner: lib/runner_client's (which sees no HTTP
 * request) given what they need of one (the arena, configuration, database
 * connection and request id), and the takeover of an agent whose runner is
 * gone (invoke_takeover.c, the cluster's policy). */
#ifndef AH_HANDLERS_RUNNER_CALLS_H
#define AH_HANDLERS_RUNNER_CALLS_H

#include <json-c/json.h>
#include <stdbool.h>

#include "http/http.h"
#include "runner_client/runner_client.h"

/* Sends req (not consumed) and parses the answer into *resp (owned by the
 * request's arena). AH_ETIMEOUT when no answer came within timeout_ms;
 * AH_EBUSY when the runner could not be reached, so the request was never
 * sent; AH_EFAIL when the connection broke after it was, or the runner
 * answered garbage. A failed answer's "code" says why (rpc/rpc.h). */
int ah_runner_call(ah_req *r, json_object *req, json_object **resp, int timeout_ms);
/* The same for a run that asks for "stream": fn gets the chunks the runner
 * sends before its answer. fn NULL: a plain call. */
int ah_runner_call_stream(ah_req *r, json_object *req, json_object **resp, int timeout_ms,
                          ah_runner_chunk_fn fn, void *ctx);

/* The runner an invocation of the agent goes to: runner_id, or when that
 * runner is gone (no heartbeat for three periods) and the agent is movable
 * (its image is in the file store), a live runner that now holds it
 * (invoke_takeover.c). Returns runner_id itself when nothing moved. */
const char *ah_runner_takeover(ah_req *r, const char *agent_id, const char *runner_id,
                               bool movable, long long age_ms);
/* age_ms: how long ago runner_id last beat, as read with the request (the
 * invoke route's lookup), or -1 to ask the database. */

/* The operations of runner_client.h, for the request r. */
int ah_runner_destroy_agent(ah_req *r, const char *agent_id);
int ah_runner_forget_agent(ah_req *r, const char *agent_id, const char *runner_id, bool purge);
int ah_runner_left_image(ah_req *r, const char *agent_id, const char *runner_id, bool purge,
                         const char *left_image);
int ah_runner_retire_warm(ah_req *r, const char *agent_id, const char *runner_id);

#endif
