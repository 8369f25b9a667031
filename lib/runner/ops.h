/* The operations of the runner protocol (docs/runner-protocol.md). Each takes
 * the parsed request and returns the answer object (caller puts it). */
#ifndef AH_RUNNER_OPS_H
#define AH_RUNNER_OPS_H

#include <json-c/json.h>

#include "rpc/rpc.h"
#include "runner/runner.h"
#include "runner/sandboxes.h"

struct ah_warm_next;

/* What an operation leaves to do once its answer is written (ah_op_finish):
 * releasing an ephemeral sandbox takes a while, and the answer need not wait. */
typedef struct ah_op_after {
	struct ah_sbx_lease lease;
	bool pending, broken;
	bool warm;                 /* the agent is warm: its warm processes may want a start */
	struct ah_warm_next *next; /* a session's next process to start, then release */
} ah_op_after;

/* A failed answer: {"ok":false,"code":…,"error":msg} (rpc/rpc.h). The code
 * is what the API acts on; msg is shown to the person who made the call. */
json_object *ah_op_error(ah_rpc_code code, const char *msg);
/* A refusal worth retrying soon (code busy: the host at its sandbox budget,
 * this runner at its capacity; overloaded: no connection thread free): as
 * ah_op_error, with "retry_after" (seconds) and the older protocol's
 * "busy": true. The API answers 503 with Retry-After. */
json_object *ah_op_busy(ah_rpc_code code, const char *msg);
json_object *ah_op_ping(const struct ah_runner *r, json_object *req);
json_object *ah_op_run(struct ah_runner *r, json_object *req, ah_op_after *after);
void ah_op_finish(ah_op_after *after);
json_object *ah_op_destroy_session(json_object *req);
json_object *ah_op_destroy_agent(const struct ah_runner *r, json_object *req);
json_object *ah_op_retire_warm(json_object *req);

#endif
