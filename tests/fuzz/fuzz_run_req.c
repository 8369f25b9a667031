/* Fuzz target: the runner reading a `run` request from the API (run_req.c):
 * JSON in, a checked request or a refusal out. Property: an accepted request
 * has an environment of NAME=value strings, ids within their limits, and a
 * timeout and output cap inside the protocol's bounds. */
#include "runner/run_req.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ah_runner r = { .data_dir = "/nonexistent-fuzz-data" };
	json_tokener *tok = json_tokener_new_ex(32);
	json_object *req = tok ? json_tokener_parse_ex(tok, (const char *)data, (int)size) : NULL;
	json_tokener_free(tok);
	if (!req || !json_object_is_type(req, json_type_object)) {
		json_object_put(req);
		return 0;
	}
	struct ah_run_req q = {0};
	ah_err err = {0};
	if (ah_run_req_parse(&q, &r, req, &err) == 0) {
		if (q.timeout_ms < 1 || q.timeout_ms > 600000 || q.max_output < 1 ||
		    strlen(q.agent_id) > 32 || !q.envp || q.envp[q.nenv] != NULL)
			__builtin_trap();
		for (size_t i = 0; i < q.nenv; i++)
			if (!strchr(q.envp[i], '=') || q.envp[i][0] == '=')
				__builtin_trap();
	} else if (!err.msg[0]) {
		__builtin_trap(); /* a refusal always says why */
	}
	ah_run_req_free(&q);
	json_object_put(req);
	return 0;
}
