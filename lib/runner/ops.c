/* The runner protocol's operations. `run` checks every field before anything
 * happens: ids and session keys are restricted to the characters the API
 * allows (they end up in log lines), the image must be one of this runner's
 * image directories (a bad request must not mount an arbitrary host directory
 * into a sandbox), and the environment is passed as the whole environment of
 * the program, never logged, and wiped after the call. */
#include "runner/ops.h"
#include "runner/gateway.h"
#include "runner/sandboxes.h"
#include "runner/fuse.h"
#include "core/log.h"
#include "core/json.h"
#include "core/util.h"
#include "deploy/deploy.h"

#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_MAX_OUTPUT (10 << 20)
#define LIMIT_MAX_OUTPUT (16 << 20)
#define BUSY_RETRY_S 5     /* a sandbox's life is seconds: one may have ended then */

struct run_req {
	const char *invocation_id, *agent_id, *image, *entrypoint, *session;
	char **envp;
	size_t nenv;
	unsigned char *in;
	size_t in_len;
	int timeout_ms;
	size_t max_output;
};

/* model_gateway = on: the key stays here, the agent gets a token (gateway.h). */
struct gw_plan {
	char *key;
	char token[AH_GATEWAY_TOKEN_LEN + 1];
};

json_object *ah_op_error(const char *msg)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(0));
	json_object_object_add(o, "error", json_object_new_string(msg));
	return o;
}

/* A refusal worth retrying soon: the host is at its sandbox budget, or this
 * runner at its capacity. The API answers 503 with Retry-After. */
static json_object *busy_answer(const char *msg)
{
	json_object *o = ah_op_error(msg);
	json_object_object_add(o, "busy", json_object_new_boolean(1));
	json_object_object_add(o, "retry_after", json_object_new_int(BUSY_RETRY_S));
	return o;
}

static json_object *ok_answer(void)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(1));
	return o;
}

/* 1..max characters, each alphanumeric or in `extra`. */
static bool token_ok(const char *s, size_t max, const char *extra)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      strchr(extra, c)))
			return false;
	}
	return true;
}

static long long get_int(json_object *req, const char *key, long long def, long long min,
                         long long max)
{
	json_object *v;
	if (!json_object_object_get_ex(req, key, &v) || !json_object_is_type(v, json_type_int))
		return def;
	long long n = json_object_get_int64(v);
	return n < min ? min : n > max ? max : n;
}

json_object *ah_op_ping(const struct ah_runner *r)
{
	json_object *o = ok_answer();
	json_object_object_add(o, "runner_id", json_object_new_string(r->id));
	json_object_object_add(o, "sandboxes", json_object_new_int64((int64_t)ah_sandboxes_count()));
	return o;
}

/* ---- run: parsing -------------------------------------------------------- */

static void free_env(struct run_req *q)
{
	for (size_t i = 0; i < q->nenv; i++) {
		sodium_memzero(q->envp[i], strlen(q->envp[i]));
		free(q->envp[i]);
	}
	free(q->envp);
	if (q->in) {
		sodium_memzero(q->in, q->in_len);
		free(q->in);
	}
}

static int add_env(struct run_req *q, const char *key, const char *val)
{
	size_t n = strlen(key) + strlen(val) + 2;
	char *s = malloc(n);
	if (!s)
		return -1;
	snprintf(s, n, "%s=%s", key, val);
	q->envp[q->nenv++] = s;
	return 0;
}

/* The request's variables, then the defaults the request did not set. */
static const char *parse_env(struct run_req *q, json_object *req)
{
	static const char *const defaults[][2] = {
		{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", "/tmp"}, {"LANG", "C.UTF-8"},
	};
	json_object *env = NULL;
	if (json_object_object_get_ex(req, "env", &env) && !json_object_is_type(env, json_type_object)
	    && !json_object_is_type(env, json_type_null))
		return "\"env\" must be an object";
	size_t n = env && json_object_is_type(env, json_type_object) ? json_object_object_length(env) : 0;
	q->envp = calloc(n + 6, sizeof(char *)); /* + 3 defaults + 2 of the model gateway */
	if (!q->envp)
		return "out of memory";
	if (n > 0) {
		json_object_object_foreach(env, k, v) {
			if (!token_ok(k, 128, "_") || (k[0] >= '0' && k[0] <= '9'))
				return "invalid environment variable name";
			if (!json_object_is_type(v, json_type_string) ||
			    strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v))
				return "environment values must be strings without NUL";
			if (add_env(q, k, json_object_get_string(v)) != 0)
				return "out of memory";
		}
	}
	for (size_t d = 0; d < 3; d++)
		if (!(env && json_object_object_get_ex(env, defaults[d][0], NULL)) &&
		    add_env(q, defaults[d][0], defaults[d][1]) != 0)
			return "out of memory";
	return NULL;
}

static const char *parse_stdin(struct run_req *q, json_object *req)
{
	const char *b64 = ah_json_get_str(req, "stdin_b64");
	size_t len = b64 ? strlen(b64) : 0;
	q->in = malloc(len / 4 * 3 + 4);
	if (!q->in)
		return "out of memory";
	if (len && sodium_base642bin(q->in, len / 4 * 3 + 4, b64, len, NULL, &q->in_len, NULL,
	                             sodium_base64_VARIANT_ORIGINAL) != 0)
		return "stdin_b64 is not valid base64";
	return NULL;
}

/* The image must be an existing directory under <data_dir>/images/. */
static bool image_ok(const struct ah_runner *r, const char *image)
{
	char real[PATH_MAX];
	size_t dl = strlen(r->data_dir);
	if (!image || !realpath(image, real))
		return false;
	return strncmp(real, r->data_dir, dl) == 0 && strncmp(real + dl, "/images/", 8) == 0 &&
	       strcmp(real, image) == 0;
}

static const char *parse_run(struct run_req *q, const struct ah_runner *r, json_object *req)
{
	json_object *s = NULL;
	q->invocation_id = ah_json_get_str(req, "invocation_id");
	q->agent_id = ah_json_get_str(req, "agent_id");
	q->image = ah_json_get_str(req, "image");
	q->entrypoint = ah_json_get_str(req, "entrypoint");
	q->session = ah_json_get_str(req, "session");
	if (json_object_object_get_ex(req, "session", &s) && s && !q->session)
		return "\"session\" must be a string or null";
	if (!token_ok(q->invocation_id, 64, "_-"))
		return "invalid invocation_id";
	if (!token_ok(q->agent_id, 32, "_"))
		return "invalid agent_id";
	if (q->session && !token_ok(q->session, 128, "._:-"))
		return "invalid session";
	if (!q->entrypoint || ah_deploy_path_check(q->entrypoint) != 0)
		return "invalid entrypoint";
	if (!image_ok(r, q->image))
		return "image is not an image directory of this runner";
	q->timeout_ms = (int)get_int(req, "timeout_ms", 120000, 1, 600000);
	q->max_output = (size_t)get_int(req, "max_output_bytes", DEFAULT_MAX_OUTPUT, 1, LIMIT_MAX_OUTPUT);
	const char *e = parse_env(q, req);
	return e ? e : parse_stdin(q, req);
}

/* ---- run: capacity and execution ---------------------------------------- */

static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slot_cv = PTHREAD_COND_INITIALIZER;
static int slots_used;

static bool take_slot(const struct ah_runner *r, int wait_ms)
{
	struct timespec ts = ah_deadline_in_ms(wait_ms);
	pthread_mutex_lock(&slot_mu);
	int rc = 0;
	while (slots_used >= r->capacity && rc == 0)
		rc = pthread_cond_timedwait(&slot_cv, &slot_mu, &ts);
	bool ok = slots_used < r->capacity;
	if (ok)
		slots_used++;
	pthread_mutex_unlock(&slot_mu);
	return ok;
}

static void give_slot(void)
{
	pthread_mutex_lock(&slot_mu);
	slots_used--;
	pthread_cond_signal(&slot_cv);
	pthread_mutex_unlock(&slot_mu);
}

static json_object *run_answer(const char *sandbox_id, const ah_sandbox_result *res)
{
	json_object *o = ok_answer();
	size_t cap = sodium_base64_ENCODED_LEN(res->out_len, sodium_base64_VARIANT_ORIGINAL);
	char *b64 = malloc(cap);
	if (!b64) {
		json_object_put(o);
		return ah_op_error("out of memory");
	}
	sodium_bin2base64(b64, cap, (const unsigned char *)(res->out ? res->out : ""), res->out_len,
	                  sodium_base64_VARIANT_ORIGINAL);
	json_object_object_add(o, "sandbox_id", json_object_new_string(sandbox_id));
	json_object_object_add(o, "exit_code", json_object_new_int(res->exit_code));
	json_object_object_add(o, "signal", json_object_new_int(res->signal));
	json_object_object_add(o, "timed_out", json_object_new_boolean(res->timed_out));
	json_object_object_add(o, "oom_killed", json_object_new_boolean(res->oom_killed));
	json_object_object_add(o, "output_truncated", json_object_new_boolean(res->output_truncated));
	json_object_object_add(o, "stdout_b64", json_object_new_string(b64));
	json_object_object_add(o, "duration_ms", json_object_new_int64(res->duration_ms));
	free(b64);
	return o;
}

/* An ephemeral sandbox is destroyed at its release, which takes a while (the
 * keeper's pid namespace must die and be reaped), and the agent's next one is
 * built then (a spare: sandboxes.h). The answer depends on neither, so the
 * lease rides on the answer object and both happen when the server drops that
 * object, after the answer has been written. */
struct deferred_release {
	struct ah_sbx_lease lease;
	bool broken;
};

static void release_later(json_object *ans, void *ud)
{
	struct deferred_release *d = ud;
	(void)ans;
	/* This connection's thread ends after this. The work is background: it
	 * waits for a moment when no agent runs (see ah_sandbox_wait_quiet) and
	 * runs as SCHED_IDLE. */
	ah_sandbox_wait_quiet();
	ah_sandbox_background(true);
	ah_sandboxes_release(&d->lease, d->broken);
	free(d);
}

static void release_with(json_object *ans, struct ah_sbx_lease *lease, bool broken)
{
	struct deferred_release *d = malloc(sizeof(*d));
	if (!d) {
		ah_sandboxes_release(lease, broken);
		return;
	}
	d->lease = *lease;
	d->broken = broken;
	json_object_set_userdata(ans, d, release_later);
}

/* The model gateway's part of the answer: what the provider counted. */
static void add_model_usage(json_object *ans, const ah_gateway_usage *u)
{
	json_object_object_add(ans, "model_input_tokens", json_object_new_int64(u->input_tokens));
	json_object_object_add(ans, "model_output_tokens", json_object_new_int64(u->output_tokens));
	json_object_object_add(ans, "model_requests", json_object_new_int(u->requests));
}

/* Serves the gateway inside the leased sandbox for this run. */
static int gateway_open(ah_gateway **out, const struct ah_runner *r, const struct run_req *q,
                        const struct gw_plan *gw, const ah_sandbox *sb, const char *tag,
                        ah_err *err)
{
	int lfd;
	int rc = ah_sandbox_listen_loopback(sb, AH_GATEWAY_PORT, &lfd, err);
	return rc ? rc : ah_gateway_start(out, r->cfg, lfd, gw->key, gw->token, tag, q->timeout_ms, err);
}

static json_object *execute(const struct ah_runner *r, const struct run_req *q,
                            const struct gw_plan *gw)
{
	ah_gateway *g = NULL;
	ah_gateway_usage usage = {0};
	struct ah_sbx_lease lease = {0};
	ah_sandbox_result res = {0};
	ah_err err = {0};
	char entry[1100], tag[80];
	snprintf(entry, sizeof(entry), "/app/%s", q->entrypoint);
	snprintf(tag, sizeof(tag), "inv=%s", q->invocation_id);
	int rc = ah_sandboxes_acquire(&lease, q->agent_id, q->session, q->image, &err);
	if (rc == AH_EBUSY) {
		/* The numbers are for the operator's log, not for clients. */
		ah_log_warn("%s agent=%s: refused: %s", tag, q->agent_id, err.msg);
		return busy_answer("the host is at its sandbox memory or disk budget");
	}
	if (rc != 0) {
		ah_log_error("%s agent=%s: no sandbox: %s", tag, q->agent_id, err.msg);
		/* A bucket mount's failure is the user's to know (it names the mount
		 * and bucket, never a credential); anything else is the operator's. */
		return ah_op_error(strncmp(err.msg, "Bucket mount", 12) == 0 ? err.msg
		                   : "could not create a sandbox");
	}
	const char *argv[] = {"/usr/bin/node", entry, NULL};
	ah_sandbox_exec_spec x = {
		.argv = argv, .envp = (const char *const *)q->envp, .stdin_data = q->in,
		.stdin_len = q->in_len, .timeout_ms = q->timeout_ms, .max_output = q->max_output,
		.log_tag = tag, .cwd = "/app",
	};
	const char *sandbox_id = ah_sandbox_id(lease.sb);
	json_object *ans;
	if (gw && gateway_open(&g, r, q, gw, lease.sb, tag, &err) != 0) {
		ah_log_error("%s agent=%s sandbox=%s: no model gateway: %s", tag, q->agent_id,
		             sandbox_id, err.msg);
		ah_sandboxes_release(&lease, true); /* its namespace may be at fault: not reused */
		return ah_op_error("could not start the model gateway");
	}
	rc = ah_sandbox_exec(lease.sb, &x, &res, &err);
	ah_gateway_stop(g, &usage); /* the token dies with the run */
	if (rc == 0) {
		ah_log_info("%s agent=%s sandbox=%s: exit=%d signal=%d timed_out=%d oom=%d %lld ms", tag,
		            q->agent_id, sandbox_id, res.exit_code, res.signal, res.timed_out,
		            res.oom_killed, res.duration_ms);
		ans = run_answer(sandbox_id, &res);
		if (gw)
			add_model_usage(ans, &usage);
	} else {
		ah_log_error("%s agent=%s sandbox=%s: exec failed: %s", tag, q->agent_id, sandbox_id, err.msg);
		ans = ah_op_error("the sandbox failed to run the agent");
	}
	ah_sandbox_result_free(&res);
	if (q->session) {
		ah_sandboxes_release(&lease, rc == AH_EFAIL); /* cheap: the sandbox stays */
	} else {
		ah_sandbox_done(lease.sb);
		release_with(ans, &lease, rc == AH_EFAIL);
	}
	return ans;
}

/* Drops NAME=… from the environment. */
static void env_drop(struct run_req *q, const char *name)
{
	size_t n = strlen(name), w = 0;
	for (size_t i = 0; i < q->nenv; i++) {
		if (strncmp(q->envp[i], name, n) == 0 && q->envp[i][n] == '=') {
			sodium_memzero(q->envp[i], strlen(q->envp[i]));
			free(q->envp[i]);
		} else {
			q->envp[w++] = q->envp[i];
		}
	}
	q->nenv = w;
	q->envp[w] = NULL;
}

static bool gateway_on(const ah_config *cfg)
{
	return ah_cfg_bool(cfg, AH_CFG_MODEL_GATEWAY);
}

/* With the gateway on, the agent's model key variable holds a fresh token
 * (whatever the API put there, the real key included, is dropped) and
 * ANTHROPIC_BASE_URL the gateway: SDKs that read both need no change. */
static const char *gateway_plan(struct gw_plan *gw, struct run_req *q, const ah_config *cfg)
{
	ah_err err = {0};
	const char *name = ah_cfg_str(cfg, AH_CFG_MODEL_KEY_NAME);
	if (ah_gateway_read_key(&gw->key, cfg, &err) != 0) {
		ah_log_error("model gateway: %s", err.msg);
		return "the model gateway has no key";
	}
	if (!*gw->key)
		ah_log_warn("model_gateway is on but no model key is configured (model_key_value, "
		            "model_key_file): the provider will refuse the agents' calls");
	ah_gateway_new_token(gw->token);
	env_drop(q, name);
	env_drop(q, "ANTHROPIC_BASE_URL");
	if (add_env(q, name, gw->token) != 0 || add_env(q, "ANTHROPIC_BASE_URL", AH_GATEWAY_URL) != 0)
		return "out of memory";
	return NULL;
}

static void gateway_plan_free(struct gw_plan *gw)
{
	if (gw->key) {
		sodium_memzero(gw->key, strlen(gw->key));
		free(gw->key);
	}
	sodium_memzero(gw->token, sizeof gw->token);
}

json_object *ah_op_run(struct ah_runner *r, json_object *req)
{
	struct run_req q = {0};
	struct gw_plan gw = {0};
	bool use_gw = gateway_on(r->cfg);
	const char *bad = parse_run(&q, r, req);
	if (!bad && use_gw)
		bad = gateway_plan(&gw, &q, r->cfg);
	json_object *ans;
	if (bad) {
		ah_log_warn("run refused: %s", bad);
		ans = ah_op_error(bad);
	} else if (r->stopping) {
		ans = ah_op_error("runner shutting down");
	} else if (!take_slot(r, 10000)) {
		ans = busy_answer("runner at capacity");
	} else {
		ans = execute(r, &q, use_gw ? &gw : NULL);
		give_slot();
	}
	gateway_plan_free(&gw);
	free_env(&q);
	return ans;
}

/* ---- destroy ------------------------------------------------------------- */

json_object *ah_op_destroy_session(json_object *req)
{
	const char *agent = ah_json_get_str(req, "agent_id"), *session = ah_json_get_str(req, "session");
	if (!token_ok(agent, 32, "_") || !token_ok(session, 128, "._:-"))
		return ah_op_error("invalid agent_id or session");
	int n = ah_sandboxes_destroy_session(agent, session);
	ah_log_info("agent=%s session=%s: destroy_session (%d sandbox)", agent, session, n);
	return ok_answer();
}

/* With purge (the agent is deleted) its images go too, now rather than at the
 * next sweep (heartbeat.c), which stays the net under a missed call. */
json_object *ah_op_destroy_agent(const struct ah_runner *r, json_object *req)
{
	const char *agent = ah_json_get_str(req, "agent_id");
	json_object *purge = NULL;
	if (!token_ok(agent, 32, "_"))
		return ah_op_error("invalid agent_id");
	int n = ah_sandboxes_destroy_agent(agent);
	ah_fuse_retain(agent, NULL); /* its bucket mounts: the next call starts them again */
	ah_log_info("agent=%s: destroy_agent (%d sandboxes)", agent, n);
	if (json_object_object_get_ex(req, "purge", &purge) && json_object_get_boolean(purge)) {
		char dir[PATH_MAX + 64];
		snprintf(dir, sizeof(dir), "%s/images/%s", r->data_dir, agent);
		ah_log_info("agent=%s deleted: removing its images", agent);
		ah_deploy_rmtree(dir);
	}
	json_object *o = ok_answer();
	json_object_object_add(o, "destroyed", json_object_new_int(n));
	return o;
}
