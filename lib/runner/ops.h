/* The operations of the runner protocol (docs/runner-protocol.md). Each takes
 * the parsed request and returns the answer object (caller puts it). */
#ifndef AH_RUNNER_OPS_H
#define AH_RUNNER_OPS_H

#include <json-c/json.h>

#include "runner/runner.h"

json_object *ah_op_error(const char *msg);
json_object *ah_op_ping(const struct ah_runner *r);
json_object *ah_op_run(struct ah_runner *r, json_object *req);
json_object *ah_op_destroy_session(json_object *req);
json_object *ah_op_destroy_agent(const struct ah_runner *r, json_object *req);

#endif
