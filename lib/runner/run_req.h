/* A `run` request of the runner protocol, checked and copied out of its JSON
 * before anything happens (ops.c): ids and session keys are restricted to the
 * characters the API allows (they end up in log lines), the image must be one
 * of this runner's image directories (a bad request must not mount an
 * arbitrary host directory into a sandbox), and the environment is the whole
 * environment of the program, never logged, wiped when freed. */
#ifndef AH_RUNNER_RUN_REQ_H
#define AH_RUNNER_RUN_REQ_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"
#include "runner/runner.h"
#include "sandbox/sandbox.h"

struct ah_run_req {
	const char *invocation_id, *agent_id, *image, *entrypoint, *session; /* in the JSON */
	char **envp;               /* NAME=value, NULL-terminated, owned */
	size_t nenv, env_cap;
	unsigned char *in;         /* the program's stdin, owned */
	size_t in_len;
	int timeout_ms;
	size_t max_output;
	json_object *files;        /* managed files in and out (run_files.c), or NULL; in the JSON */
	bool stream;               /* stdout back as chunks while it runs (cancel.h) */
	int min_warm;              /* warm processes to keep (warm.h); 0: none */
	json_object *budget;       /* spend rows for the model gateway, or NULL; in the JSON */
	ah_sandbox_egress *egress; /* the agent's allow-list, owned; NULL: the open network */
	/* The values of the request's "env" (the agent's secrets, the model key):
	 * redacted from the program's stderr (ops.c). Owned array, strings in the JSON. */
	const char **secrets;
	size_t nsecrets;
};

/* Fills q from req (which must outlive q); AH_EINVALID with the reason for the
 * client, or AH_EFAIL. q must be freed either way. */
int ah_run_req_parse(struct ah_run_req *q, const struct ah_runner *r, json_object *req,
                     ah_err *err);
/* Adds NAME=value (room is kept for the model gateway's two). */
int ah_run_req_setenv(struct ah_run_req *q, const char *name, const char *val, ah_err *err);
/* Drops NAME=… , wiping it. */
void ah_run_req_unsetenv(struct ah_run_req *q, const char *name);
void ah_run_req_free(struct ah_run_req *q);

/* 1..max characters, each alphanumeric or in `extra`. */
bool ah_run_token_ok(const char *s, size_t max, const char *extra);

#endif
