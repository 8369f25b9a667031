/* The runner's answer to a run, as the invocation's outcome (invoke.c). Its
 * own file so that tests/fuzz/fuzz_answer.c reads answers exactly as a worker
 * does: the runner is another process, possibly on another host, and what it
 * sends is input like any other. */
#ifndef AH_HANDLERS_INVOKE_ANSWER_H
#define AH_HANDLERS_INVOKE_ANSWER_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "http/http.h"

#define AH_INVOCATION_LOG_MAX (64 * 1024) /* stderr kept per invocation */

typedef struct ah_run_out {
	int http;              /* 200, 500, 503 (nothing ran: retry) or 504 */
	long long retry_after; /* 503: seconds, 1..600 */
	const char *error;     /* NULL on success; the result's "error" */
	const char *detail;    /* the error response's "detail" */
	const char *sandbox_id;
	char *out;             /* stdout bytes; NULL when the agent never ran */
	size_t out_len;
	const char *model_in, *model_out; /* the model gateway's counts; NULL: off */
	long long model_cache_write, model_cache_read; /* parts of model_in priced apart */
	long long model_cache_write_1h;                 /* part of model_cache_write */
	json_object *files;    /* session files the run produced (invoke_files.c) */
	const char *files_error; /* why some were not kept, or NULL */
	char *err_log;         /* the end of its stderr, redacted (the invocation's logs) */
	size_t err_log_len;
	bool err_log_truncated;
	bool cancelled;        /* POST …/cancel stopped it (the runner says so) */
	long long model_charged; /* pico-dollars the gateway charged to the budgets (budgets.h) */
} ah_run_out;

/* A failure: 500 with "Invocation failed: <error>". */
void ah_run_failed(ah_req *r, ah_run_out *o, const char *error);
/* The HTTP status of a failed runner answer's code (ah_rpc_code, rpc/rpc.h):
 * the one table of them; 500 for a code out of range. */
int ah_run_code_http(int code);

/* 504: the agent (or the runner's answer) did not come within timeout_s. */
void ah_run_timed_out(ah_req *r, ah_run_out *o, long long timeout_s);

/* The answer ans (any JSON value) → o, most specific cause first; out_cap is
 * the output cap the request asked for (named in the error). */
void ah_run_answer(ah_req *r, json_object *ans, long long timeout_s, long long out_cap,
                   ah_run_out *o);

#endif
