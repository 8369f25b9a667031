/* The runner protocol's operations. `run` checks every field before anything
 * happens (run_req.h); the environment is passed as the whole environment of
 * the program, never logged, and wiped after the call. Each operation works
 * with ah_err and turns its outcome into an answer object at the end: the
 * message of an error is the client's, the details went to the log. */
#include "runner/ops.h"
#include "runner/cancel.h"
#include "runner/gateway.h"
#include "runner/run_req.h"
#include "runner/run_files_int.h"
#include "runner/fuse.h"
#include "runner/warm.h"
#include "runner/egress.h"
#include "runner/sandboxes.h"
#include "core/log.h"
#include "core/json.h"
#include "core/util.h"
#include "core/settings.h"

#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUSY_RETRY_S 5     /* a sandbox's life is seconds: one may have ended then */
#define SLOT_WAIT_MS 10000
#define STDERR_KEEP (64 * 1024) /* an invocation's logs: the end of its stderr */

/* model_gateway = on: the key stays here, the agent gets a token (gateway.h). */
struct gw_plan {
	char *key;
	char token[AH_GATEWAY_TOKEN_LEN + 1];
};

/* What a run produced, for its answer. */
struct run_out {
	char sandbox_id[64];
	bool warm;                 /* it ran in a warm process (warm.h) */
	ah_sandbox_result res;
	ah_gateway_usage usage;
	bool metered;              /* the model gateway served the run */
	json_object *files;        /* managed files out of the run (run_collect.c), or NULL */
	/* Its phases' marks (ah_mono_us): the request in, a slot taken, the
	 * sandbox ready for the exec, the exec over (issue 31). */
	int64_t t_in, t_slot, t_ready, t_ran;
};

/* ---- answers ------------------------------------------------------------- */

/* One field of an answer: answers are written from these tables rather than
 * a json-c call per field. */
typedef struct {
	const char *key;
	enum { F_STR, F_INT, F_BOOL } type;
	const char *s;
	int64_t i;
} field;

static json_object *answer_of(bool ok, const field *f, size_t n)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(ok));
	for (size_t k = 0; k < n; k++)
		json_object_object_add(o, f[k].key,
		                       f[k].type == F_STR    ? json_object_new_string(f[k].s)
		                       : f[k].type == F_BOOL ? json_object_new_boolean(f[k].i != 0)
		                                             : json_object_new_int64(f[k].i));
	return o;
}

json_object *ah_op_error(ah_rpc_code code, const char *msg)
{
	field f[] = { {"code", F_STR, ah_rpc_code_name(code), 0}, {"error", F_STR, msg, 0} };
	return answer_of(false, f, sizeof f / sizeof f[0]);
}

/* The "busy" boolean is the protocol before codes, still sent for an API
 * host one release older during a rolling upgrade of a cluster; this
 * release's API reads the code. */
json_object *ah_op_busy(ah_rpc_code code, const char *msg)
{
	field f[] = { {"code", F_STR, ah_rpc_code_name(code), 0}, {"error", F_STR, msg, 0},
	              {"busy", F_BOOL, NULL, 1}, {"retry_after", F_INT, NULL, BUSY_RETRY_S} };
	return answer_of(false, f, sizeof f / sizeof f[0]);
}

/* A failed run's answer: its code from its status (ah_rpc_code_of). */
static json_object *error_answer(int rc, const ah_err *err)
{
	ah_rpc_code code = ah_rpc_code_of(rc);
	return code == AH_RPC_BUSY ? ah_op_busy(code, err->msg) : ah_op_error(code, err->msg);
}

/* The kept end of stderr, redacted (ah_sandbox_exec_spec.redact). */
static void add_stderr(json_object *ans, const ah_sandbox_result *res)
{
	size_t n = res->err_log ? res->err_log_len : 0;
	size_t cap = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
	char *b64 = malloc(cap);
	if (!b64)
		return;
	sodium_bin2base64(b64, cap, (const unsigned char *)(n ? res->err_log : ""), n,
	                  sodium_base64_VARIANT_ORIGINAL);
	json_object_object_add(ans, "stderr_b64", json_object_new_string(b64));
	json_object_object_add(ans, "stderr_truncated", json_object_new_boolean(res->err_log_truncated));
	free(b64);
}

/* The run's phases in microseconds, for the API's Server-Timing and the
 * invocation's record: queue (checks and a wait for a slot), take (the
 * sandbox leased, the gateway and the call's files placed), start, run (the
 * sandbox's split of the exec) and collect (files out, the answer encoded). */
static void add_timing(json_object *ans, const struct run_out *o)
{
	static const char *const k[] = {"queue_us", "take_us", "start_us", "run_us", "collect_us"};
	int64_t v[] = {o->t_slot - o->t_in, o->t_ready - o->t_slot, o->res.start_us, o->res.run_us,
	               ah_mono_us() - o->t_ran};
	json_object *t = json_object_new_object();
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		json_object_object_add(t, k[i], json_object_new_int64(v[i]));
	json_object_object_add(ans, "timing", t);
}

static json_object *run_answer(const struct run_out *o)
{
	const ah_sandbox_result *res = &o->res;
	size_t cap = sodium_base64_ENCODED_LEN(res->out_len, sodium_base64_VARIANT_ORIGINAL);
	char *b64 = malloc(cap);
	if (!b64)
		return ah_op_error(AH_RPC_FAILED, "out of memory");
	sodium_bin2base64(b64, cap, (const unsigned char *)(res->out ? res->out : ""), res->out_len,
	                  sodium_base64_VARIANT_ORIGINAL);
	field f[] = {
		{"sandbox_id", F_STR, o->sandbox_id, 0}, {"exit_code", F_INT, NULL, res->exit_code},
		{"signal", F_INT, NULL, res->signal}, {"timed_out", F_BOOL, NULL, res->timed_out},
		{"oom_killed", F_BOOL, NULL, res->oom_killed},
		{"output_truncated", F_BOOL, NULL, res->output_truncated},
		{"stdout_b64", F_STR, b64, 0}, {"duration_ms", F_INT, NULL, res->duration_ms},
		/* the model gateway's part: what the provider counted */
		{"model_input_tokens", F_INT, NULL, o->usage.input_tokens},
		{"model_output_tokens", F_INT, NULL, o->usage.output_tokens},
		{"model_cache_write_tokens", F_INT, NULL, o->usage.cache_write_tokens},
		{"model_cache_read_tokens", F_INT, NULL, o->usage.cache_read_tokens},
		{"model_cache_write_1h_tokens", F_INT, NULL, o->usage.cache_write_1h_tokens},
		{"model_requests", F_INT, NULL, o->usage.requests},
		{"model_budget_charged_pico", F_INT, NULL, o->usage.budget_charged},
		/* last: only when an answer's usage could not be read */
		{"model_access_ended", F_STR, o->usage.ended, 0},
	};
	size_t n = sizeof f / sizeof f[0];
	n -= !o->metered ? 8 : !*o->usage.ended ? 1 : 0;
	json_object *ans = answer_of(true, f, n);
	free(b64);
	if (o->metered && o->usage.error[0])
		json_object_object_add(ans, "model_error", json_object_new_string(o->usage.error));
	add_stderr(ans, res);
	if (res->cancelled)
		json_object_object_add(ans, "cancelled", json_object_new_boolean(1));
	add_timing(ans, o);
	if (o->files) {
		json_object_object_foreach(o->files, k, v)
			json_object_object_add(ans, k, json_object_get(v));
	}
	return ans;
}

/* With an agent_id, also how many warm processes of that agent wait. */
json_object *ah_op_ping(const struct ah_runner *r, json_object *req)
{
	const char *agent = ah_json_get_str(req, "agent_id");
	bool one = ah_run_token_ok(agent, 32, "_");
	field f[] = { {"runner_id", F_STR, r->id, 0},
	              {"sandboxes", F_INT, NULL, (int64_t)ah_sandboxes_count()},
	              {"warm", F_INT, NULL, (int64_t)ah_sandboxes_warm_total(NULL)},
	              {"agent_warm", F_INT, NULL, one ? (int64_t)ah_sandboxes_warm_total(agent) : 0} };
	return answer_of(true, f, one ? 4 : 3);
}

/* ---- run: capacity and execution ---------------------------------------- */

static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slot_cv = PTHREAD_COND_INITIALIZER;
static int slots_used;

static int take_slot(const struct ah_runner *r, ah_err *err)
{
	struct timespec ts = ah_deadline_in_ms(SLOT_WAIT_MS);
	pthread_mutex_lock(&slot_mu);
	int rc = 0;
	while (slots_used >= r->capacity && rc == 0)
		rc = pthread_cond_timedwait(&slot_cv, &slot_mu, &ts);
	bool ok = slots_used < r->capacity;
	if (ok)
		slots_used++;
	pthread_mutex_unlock(&slot_mu);
	return ok ? 0 : ah_err_set(err, AH_EBUSY, "runner at capacity");
}

static void give_slot(void)
{
	pthread_mutex_lock(&slot_mu);
	slots_used--;
	pthread_cond_signal(&slot_cv);
	pthread_mutex_unlock(&slot_mu);
}

/* An ephemeral sandbox is destroyed at its release, which takes a while (the
 * keeper's pid namespace must die and be reaped), and the agent's next one is
 * built then (a spare: sandboxes.h). The answer depends on neither: the
 * server calls this once the answer is written. */
void ah_op_finish(ah_op_after *after)
{
	if (after->warm)
		ah_warm_kick(); /* its thread waits for a quiet moment itself */
	after->warm = false;
	if (after->next) { /* a session's next process: the lease is still held */
		ah_warm_next_start(after->next, &after->lease);
		ah_warm_next_free(after->next);
		after->next = NULL;
		after->pending = false;
		ah_sandboxes_release(&after->lease, false);
		return;
	}
	if (!after->pending)
		return;
	after->pending = false;
	/* This connection's thread ends after this. The work is background: it
	 * waits for a moment when no agent runs (see ah_sandbox_wait_quiet) and
	 * runs as SCHED_IDLE. */
	ah_sandbox_wait_quiet();
	ah_sandbox_background(true);
	ah_sandboxes_release(&after->lease, after->broken);
}

/* Serves the gateway inside the leased sandbox for this run. */
static int gateway_open(ah_gateway **out, const struct ah_runner *r, const struct ah_run_req *q,
                        const struct gw_plan *gw, const ah_sandbox *sb, const char *tag,
                        ah_err *err)
{
	int lfd;
	int rc = ah_sandbox_listen_loopback(sb, AH_GATEWAY_PORT, &lfd, err);
	return rc ? rc : ah_gateway_start(out, r->cfg, lfd, gw->key, gw->token, tag, q->timeout_ms,
	                                  q->budget, err);
}

/* A warm agent's ephemeral call takes one of its warm processes when one of
 * the call's own fingerprint waits (warm.h); with the gateway, the token in
 * that process's environment is the run's token. */
static bool lease_warm(struct ah_sbx_lease *lease, const struct ah_run_req *q, const char *fp,
                       struct gw_plan *gw)
{
	char key[AH_SBX_KEY_LEN + 1];
	int dead = 0, rc = AH_ENOTFOUND;
	if (q->min_warm <= 0)
		return false;
	if (q->session) /* leased already: its next process, started after its last call */
		rc = ah_sandboxes_lease_held(lease, fp, key) ? 0 : AH_ENOTFOUND;
	else
		rc = ah_sandboxes_take_warm(lease, q->agent_id, fp, key, &dead);
	if (dead > 0)
		ah_warm_deaths(q->agent_id, fp, dead);
	if (rc == 0 && gw) { /* warm.c made it: AH_GATEWAY_TOKEN_LEN characters */
		memcpy(gw->token, key, sizeof gw->token - 1);
		gw->token[sizeof gw->token - 1] = '\0';
	}
	sodium_memzero(key, sizeof key);
	return rc == 0;
}

static int lease_sandbox(struct ah_sbx_lease *lease, const struct ah_run_req *q, const char *tag,
                         ah_err *err)
{
	ah_err why = {0};
	int rc = ah_sandboxes_acquire(lease, q->agent_id, q->session, q->image, &why);
	/* The numbers are for the operator's log, not for clients. */
	if (rc == AH_EBUSY) {
		ah_log_warn("%s agent=%s: refused: %s", tag, q->agent_id, why.msg);
		return ah_err_set(err, AH_EBUSY, "the host is at its sandbox memory or disk budget");
	}
	if (rc != 0) {
		ah_log_error("%s agent=%s: no sandbox: %s", tag, q->agent_id, why.msg);
		/* A bucket mount's failure is the user's to know (it names the mount
		 * and bucket, never a credential: fuse.h); anything else is the operator's. */
		if (rc == AH_EMOUNT || why.code == AH_EMOUNT)
			return ah_err_set(err, AH_EMOUNT, "%s", why.msg);
		return ah_err_set(err, AH_EFAIL, "could not create a sandbox");
	}
	return 0;
}

/* The call's allow-list becomes the agent's; when it changed, no sandbox
 * made under the old rules runs anything again (runner/egress.h). */
static int note_egress(const struct ah_run_req *q, ah_err *err)
{
	int changed = ah_egress_note(q->agent_id, q->egress);
	if (changed < 0)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	if (changed) {
		ah_log_info("agent=%s: new network rules: its sandboxes are replaced", q->agent_id);
		ah_warm_destroy_agent(q->agent_id);
	}
	return 0;
}

/* A failed exec as its caller hears it (too big: secrets set at once passed the API's cap). */
static int exec_failed(ah_err *err, const ah_err *why)
{
	return why->code != AH_ETOOBIG ? ah_err_set(err, AH_EFAIL, "the sandbox failed to run the agent")
	       : ah_err_set(err, AH_EFAIL, "the agent's environment (its secrets) is more than its sandbox"
	                    " holds (%d KiB, %d variables): remove or shorten secrets",
	                    AH_SANDBOX_EXEC_BYTES_MAX / 1024, AH_SANDBOX_EXEC_ARGS_MAX);
}

/* The agent's program in the leased sandbox, with the gateway when gw. */
static int run_in(const struct ah_runner *r, const struct ah_run_req *q, const struct gw_plan *gw,
                  ah_sandbox *sb, const char *tag, struct run_out *out, ah_err *err)
{
	char entry[1100];
	snprintf(entry, sizeof(entry), "/app/%s", q->entrypoint);
	const char *argv[] = {"/usr/bin/node", entry, NULL};
	ah_sandbox_exec_spec x = {
		.argv = argv, .envp = (const char *const *)q->envp, .stdin_data = q->in,
		.stdin_len = q->in_len, .timeout_ms = q->timeout_ms, .max_output = q->max_output,
		.log_tag = tag, .cwd = "/app", .keep_stderr = STDERR_KEEP,
		.on_stdout = q->stream ? ah_run_chunk : NULL,
		/* An ephemeral sandbox without files to collect ends with this
		 * run: its spawner need not make a process for a next (issue 31). */
		.last = !q->session && !q->files,
	};
	/* Whatever the agent may print of its secrets, the model key or the
	 * gateway's token is redacted before its stderr is logged or kept. */
	const char *secrets[q->nsecrets + 2];
	memcpy(secrets, q->secrets, q->nsecrets * sizeof *secrets);
	x.redact = secrets;
	x.nredact = q->nsecrets;
	if (gw) {
		secrets[x.nredact++] = gw->key;
		secrets[x.nredact++] = gw->token;
	}
	ah_gateway *g = NULL;
	ah_err why = {0};
	/* Placing and collecting the call's files count in its timeout. */
	int64_t deadline = ah_rf_now() + q->timeout_ms;
	if (gw && gateway_open(&g, r, q, gw, sb, tag, &why) != 0) {
		ah_log_error("%s agent=%s sandbox=%s: no model gateway: %s", tag, q->agent_id,
		             out->sandbox_id, why.msg);
		return ah_err_set(err, AH_EFAIL, "could not start the model gateway");
	}
	/* A warm process's sandbox got the call's attachments before it started
	 * (they are part of its fingerprint). */
	int rc = q->files && !out->warm ? ah_run_files_in(r->cfg, sb, q->files, q->session, deadline, &why) : 0;
	int64_t left = deadline - ah_rf_now();
	x.timeout_ms = (int)(left > 0 ? left : 1);
	out->t_ready = ah_mono_us();
	if (rc == AH_ETIMEOUT) { /* its files took all of its time: it timed out */
		ah_log_warn("%s agent=%s: files: %s", tag, q->agent_id, why.msg);
		out->res = (ah_sandbox_result){.exit_code = -1, .signal = 9, .timed_out = true};
		rc = 0;
	} else if (rc != 0)
		ah_log_error("%s agent=%s: files: %s", tag, q->agent_id, why.msg);
	else {
		ah_run_slot slot;
		ah_run_slot_add(&slot, q->invocation_id); /* the cancel op finds it */
		x.cancel = &slot.flag;
		rc = out->warm ? ah_sandbox_exec_finish(sb, &x, &out->res, &why)
		               : ah_sandbox_exec(sb, &x, &out->res, &why);
		ah_run_slot_remove(&slot);
	}
	out->t_ran = ah_mono_us();
	ah_gateway_stop(g, &out->usage); /* the token dies with the run */
	out->metered = gw != NULL;
	/* Stopped (systemctl restart or stop): the grace is over and its sandbox
	 * was ended under it, which is what the caller must hear. */
	if (r->stopping && (rc != 0 || out->res.signal > 0)) {
		ah_log_warn("%s agent=%s sandbox=%s: ended by the runner's stop", tag, q->agent_id,
		            out->sandbox_id);
		return ah_err_set(err, AH_EFAIL, "the runner was stopped or restarted while the agent "
		                  "ran (runs get runner_shutdown_grace_seconds, %lld s)",
		                  ah_settings_of(r->cfg)->runner.shutdown_grace_seconds);
	}
	if (rc != 0) {
		ah_log_error("%s agent=%s sandbox=%s: exec failed: %s", tag, q->agent_id,
		             out->sandbox_id, why.msg);
		return exec_failed(err, &why);
	}
	ah_log_info("%s agent=%s sandbox=%s: exit=%d signal=%d timed_out=%d oom=%d %lld ms%s%s", tag,
	            q->agent_id, out->sandbox_id, out->res.exit_code, out->res.signal,
	            out->res.timed_out, out->res.oom_killed, out->res.duration_ms,
	            out->warm ? " (warm)" : "", out->res.premade ? " (pre-made)" : "");
	if (q->files && (out->files = json_object_new_object()))
		ah_run_files_out(r->cfg, sb, q->files, out->files, deadline, tag);
	return 0;
}

/* A session's sandbox is released at once (cheap: it stays), or, for a warm
 * agent, after its next process has started once the answer is out; an
 * ephemeral one after the answer is out (ah_op_finish). A sandbox whose run
 * failed is not reused: its namespace may be at fault. A warm agent's call
 * first looks for a warm process of its fingerprint (warm.h). */
static int execute(const struct ah_runner *r, const struct ah_run_req *q, const char *fp,
                   struct gw_plan *gw, struct run_out *out, ah_op_after *after, ah_err *err)
{
	char tag[80];
	snprintf(tag, sizeof(tag), "inv=%s", q->invocation_id);
	struct ah_sbx_lease lease = {0};
	after->warm = q->min_warm > 0;
	out->warm = !q->session && lease_warm(&lease, q, fp, gw);
	int rc = out->warm ? 0 : lease_sandbox(&lease, q, tag, err);
	if (rc != 0)
		return rc;
	if (q->session)
		out->warm = lease_warm(&lease, q, fp, gw);
	snprintf(out->sandbox_id, sizeof out->sandbox_id, "%s", ah_sandbox_id(lease.sb));
	rc = run_in(r, q, gw, lease.sb, tag, out, err);
	if (q->session && rc == 0 && q->min_warm > 0 &&
	    (after->next = ah_warm_next_of(r->cfg, q, fp))) {
		*after = (ah_op_after){ .lease = lease, .pending = true, .warm = true,
		                        .next = after->next };
	} else if (q->session) {
		ah_sandboxes_release(&lease, rc != 0);
	} else {
		ah_sandbox_done(lease.sb);
		*after = (ah_op_after){ .lease = lease, .pending = true, .broken = rc != 0 };
	}
	return rc;
}

/* The gateway's key for this call, and its token in the agent's environment
 * (ah_gateway_env). */
static int gateway_plan(struct gw_plan *gw, struct ah_run_req *q, const ah_config *cfg, ah_err *err)
{
	ah_err why = {0};
	if (ah_gateway_read_key(&gw->key, cfg, &why) != 0) {
		ah_log_error("model gateway: %s", why.msg);
		return ah_err_set(err, AH_EFAIL, "the model gateway has no key");
	}
	if (!*gw->key)
		ah_log_warn("model_gateway is on but no model key is configured (model_key_value, "
		            "model_key_file): the provider will refuse the agents' calls");
	return ah_gateway_env(q, cfg, gw->token, err);
}

static void gateway_plan_free(struct gw_plan *gw)
{
	if (gw->key) {
		sodium_memzero(gw->key, strlen(gw->key));
		free(gw->key);
	}
	sodium_memzero(gw->token, sizeof gw->token);
}

/* Checked, planned and run: the steps that may refuse the request. */
static int run_steps(struct ah_runner *r, json_object *req, struct ah_run_req *q,
                     struct gw_plan *gw, struct run_out *out, ah_op_after *after, ah_err *err)
{
	bool use_gw = ah_settings_of(r->cfg)->model.gateway;
	char fp[AH_SBX_FP_LEN + 1] = "";
	int rc = ah_image_adopt_req(r, req, err);
	if (rc == 0)
		rc = ah_run_req_parse(q, r, req, err);
	if (rc == 0)
		rc = note_egress(q, err);
	/* Before the gateway's token replaces the key: the fingerprint is of
	 * what the API sent, the same for every call until something changes. */
	if (rc == 0 && q->min_warm > 0)
		ah_warm_fingerprint(fp, q);
	if (rc == 0 && !q->session)
		ah_warm_note(q, fp, ah_settings_of(r->cfg)->runner.warm_idle_seconds * 1000);
	if (rc == 0 && use_gw)
		rc = gateway_plan(gw, q, r->cfg, err);
	if (rc != 0) {
		ah_log_warn("run refused: %s", err->msg);
		return rc;
	}
	if (r->stopping) /* nothing ran: the API answers 503, to be retried */
		return ah_err_set(err, AH_EBUSY, "the runner is restarting or stopping");
	if ((rc = take_slot(r, err)) != 0)
		return rc;
	out->t_slot = ah_mono_us();
	rc = execute(r, q, fp, use_gw ? gw : NULL, out, after, err);
	give_slot();
	return rc;
}

json_object *ah_op_run(struct ah_runner *r, json_object *req, ah_op_after *after)
{
	struct ah_run_req q = {0};
	struct gw_plan gw = {0};
	struct run_out out = {.t_in = ah_mono_us()};
	ah_err err = {0};
	int rc = run_steps(r, req, &q, &gw, &out, after, &err);
	json_object *ans = rc ? error_answer(rc, &err) : run_answer(&out);
	ah_sandbox_result_free(&out.res);
	json_object_put(out.files);
	gateway_plan_free(&gw);
	ah_run_req_free(&q);
	return ans;
}
