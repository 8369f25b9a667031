/* The runner's answer to a run → the invocation's outcome (see invoke_answer.h).
 * Whatever the answer holds (missing fields, wrong types, a non-object), the
 * outcome is one of 200, 500, 503 or 504 with an error and a detail. */
#include "invoke_answer.h"
#include "core/log.h"
#include "rpc/rpc.h"

#include <signal.h>
#include <sodium.h>
#include <string.h>

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;
	return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

void ah_run_failed(ah_req *r, ah_run_out *o, const char *error)
{
	o->http = 500;
	o->error = error;
	o->detail = ah_sprintf(r->arena, "Invocation failed: %s", error);
}

/* The runner refused for now (the host at its sandbox memory or disk budget,
 * the runner at capacity or out of connection threads): nothing ran, the
 * client may retry. */
static void busy(ah_req *r, ah_run_out *o, const char *why, long long retry_after)
{
	o->http = 503;
	o->retry_after = retry_after < 1 ? 1 : retry_after > 600 ? 600 : retry_after;
	o->error = why ? why : "the host is busy";
	o->detail = ah_sprintf(r->arena, "No capacity to run the agent now (%s). Try again in "
	                       "%lld seconds.", o->error, o->retry_after);
}

/* A failed answer's code (rpc/rpc.h) → the call's HTTP status: the one
 * place the API reads a runner's refusal. 503 comes with Retry-After (busy);
 * the rest are the runner's failures, their message the user's. A code this
 * API does not know reads as failed (ah_rpc_code_parse). */
static const int code_http[AH_RPC_CODE_COUNT] = {
	[AH_RPC_OK] = 200,
	[AH_RPC_FAILED] = 500,
	[AH_RPC_BUSY] = 503,
	[AH_RPC_MOUNT] = 500,
	[AH_RPC_INVALID] = 500,
	[AH_RPC_ELSEWHERE] = 500,
	[AH_RPC_OVERLOADED] = 503,
};

/* A runner one release older (a rolling upgrade of a cluster) sends no code,
 * and "busy" for a refusal worth retrying. */
static ah_rpc_code answer_code(json_object *ans)
{
	json_object *c = get(ans, "code");
	if (!c && json_object_get_boolean(get(ans, "busy")))
		return AH_RPC_BUSY;
	return ah_rpc_code_parse(c ? json_object_get_string(c) : NULL, false);
}

int ah_run_code_http(int code)
{
	return code >= 0 && code < AH_RPC_CODE_COUNT ? code_http[code] : 500;
}

void ah_run_timed_out(ah_req *r, ah_run_out *o, long long secs)
{
	o->http = 504;
	o->error = ah_sprintf(r->arena, "agent timed out after %lld seconds", secs);
	o->detail = ah_sprintf(r->arena, "Invocation timed out after %lld seconds", secs);
}

/* One base64 field of the answer; "" when absent or not base64 (logged). */
static char *decode_b64(ah_req *r, json_object *ans, const char *key, size_t *out_len)
{
	const char *b64 = json_object_get_string(get(ans, key));
	size_t len = b64 ? strlen(b64) : 0;
	char *out = ah_alloc(r->arena, len / 4 * 3 + 4);
	*out_len = 0;
	if (len && sodium_base642bin((unsigned char *)out, len / 4 * 3 + 4, b64, len, NULL, out_len,
	                             NULL, sodium_base64_VARIANT_ORIGINAL) != 0) {
		ah_log_error("runner sent %s that is not base64", key);
		*out_len = 0;
	}
	return out;
}

/* The stderr the runner kept (at most 64 KiB; more from a runner is cut to
 * its end); a failure's error says whether there is any to read. */
static void decode_stderr(ah_req *r, json_object *ans, ah_run_out *o)
{
	o->err_log = decode_b64(r, ans, "stderr_b64", &o->err_log_len);
	o->err_log_truncated = json_object_get_boolean(get(ans, "stderr_truncated"));
	if (o->err_log_len > AH_INVOCATION_LOG_MAX) {
		o->err_log += o->err_log_len - AH_INVOCATION_LOG_MAX;
		o->err_log_len = AH_INVOCATION_LOG_MAX;
		o->err_log_truncated = true;
	}
}

/* The model gateway's counts: what the provider reported, never less than 0,
 * a part (the cache's, the 1-hour writes) never more than its whole. */
static void model_counts(ah_req *r, json_object *ans, ah_run_out *o)
{
	long long in = json_object_get_int64(get(ans, "model_input_tokens"));
	long long out = json_object_get_int64(get(ans, "model_output_tokens"));
	long long cw = json_object_get_int64(get(ans, "model_cache_write_tokens"));
	long long cr = json_object_get_int64(get(ans, "model_cache_read_tokens"));
	long long cw1h = json_object_get_int64(get(ans, "model_cache_write_1h_tokens"));
	in = in > 0 ? in : 0;
	cw = cw > 0 && cw <= in ? cw : 0;
	cr = cr > 0 && cr <= in - cw ? cr : 0;
	o->model_cache_write_1h = cw1h > 0 && cw1h <= cw ? cw1h : 0;
	o->model_in = ah_sprintf(r->arena, "%lld", in);
	o->model_out = ah_sprintf(r->arena, "%lld", out > 0 ? out : 0);
	o->model_cache_write = cw;
	o->model_cache_read = cr;
}

/* The gateway could not read the usage of an answer and ended the agent's
 * model access: the invocation is not recorded as if that answer were free.
 * A run that succeeded fails with the reason; a failure keeps its cause and
 * status and names this too. */
static void model_access_ended(ah_req *r, ah_run_out *o, const char *why)
{
	const char *what = ah_sprintf(r->arena, "model access ended: %.300s", why);
	if (o->http == 200)
		ah_run_failed(r, o, what);
	else
		o->error = ah_sprintf(r->arena, "%s (%s)", o->error, what);
}

/* How the agent's run ended, most specific cause first. */
static void outcome(ah_req *r, json_object *ans, long long timeout_s, long long out_cap,
                    ah_run_out *o)
{
	/* The provider's last error (the gateway saw it): an agent whose model
	 * call failed usually just exits non-zero, so the error names both. */
	const char *merr = json_object_get_string(get(ans, "model_error"));
	const char *why = merr ? ah_sprintf(r->arena, "; the model provider answered %s", merr) : "";
	int code = json_object_get_int(get(ans, "exit_code"));
	int sig = json_object_get_int(get(ans, "signal"));
	const char *abbrev = sig > 0 ? sigabbrev_np(sig) : NULL;
	if (json_object_get_boolean(get(ans, "timed_out")))
		ah_run_timed_out(r, o, timeout_s);
	else if (json_object_get_boolean(get(ans, "output_truncated")))
		ah_run_failed(r, o, ah_sprintf(r->arena, "output exceeded %lld bytes", out_cap));
	else if (json_object_get_boolean(get(ans, "oom_killed")))
		ah_run_failed(r, o, ah_sprintf(r->arena, "killed by signal %d (out of memory)", sig ? sig : SIGKILL));
	else if (sig > 0)
		ah_run_failed(r, o, ah_sprintf(r->arena, "killed by signal %d (SIG%s)", sig, abbrev ? abbrev : "?"));
	else if (code != 0)
		ah_run_failed(r, o, ah_sprintf(r->arena, "agent exited with status %d%s", code, why));
	else
		o->http = 200;
}

/* The runner's answer → outcome. */
void ah_run_answer(ah_req *r, json_object *ans, long long timeout_s, long long out_cap,
                   ah_run_out *o)
{
	if (!json_object_get_boolean(get(ans, "ok"))) {
		const char *e = json_object_get_string(get(ans, "error"));
		int http = ah_run_code_http(answer_code(ans));
		if (http == 503)
			busy(r, o, e, json_object_get_int64(get(ans, "retry_after")));
		else
			ah_run_failed(r, o, ah_sprintf(r->arena, "sandbox runner error: %s", e ? e : "unknown"));
		o->http = http;
		return;
	}
	o->sandbox_id = json_object_get_string(get(ans, "sandbox_id"));
	o->out = decode_b64(r, ans, "stdout_b64", &o->out_len);
	decode_stderr(r, ans, o);
	if (get(ans, "model_input_tokens"))
		model_counts(r, ans, o);
	o->model_charged = json_object_get_int64(get(ans, "model_budget_charged_pico"));
	outcome(r, ans, timeout_s, out_cap, o);
	/* Stopped on the caller's request: whatever the signal did to it. */
	if (json_object_get_boolean(get(ans, "cancelled"))) {
		ah_run_failed(r, o, "cancelled on request (POST .../cancel)");
		o->cancelled = true;
	}
	const char *ended = json_object_get_string(get(ans, "model_access_ended"));
	if (ended && *ended)
		model_access_ended(r, o, ended);
}
