/* POST /agents/{slug}/invoke: run the agent once with the prompt on stdin, in an
 * ephemeral sandbox or the sandbox of a session, and answer the contract's
 * invocation result. Served by the invoke worker pool (its own FastCGI socket),
 * so a 10-minute call never holds up CRUD requests.
 *
 * Order of work: validate → collect the environment (secrets decrypted now, so
 * a secret set a moment ago applies; an ephemeral call's come with the lookup
 * that authenticated it) → claim the session (a new one only within
 * the plan's cap of live sessions) → ask the runner → count tokens and price
 * them → record the invocation (one INSERT; its trigger updates the user's
 * daily usage and the session in the same transaction) → answer. Failed and
 * timed-out runs are recorded and priced by one rule: the prompt and the output the
 * caller receives (failed_output). The invocation id is made first: the runner
 * logs the agent's stderr under it. Managed files: invoke_files.c. Streamed
 * and asynchronous calls (issue 28) take the same steps up to the run, then
 * invoke_stream.c or invoke_async.c answer; every way runs and records through
 * ah_call_run, whose recording is ah_invocation_record (invoke_record.c). */
#include "budgets.h"
#include "invoke.h"
#include "invoke_files.h"
#include "invoke_timing.h"
#include "routes.h"
#include "validate.h"
#include "webhooks.h"
#include "crypto/crypto.h"
#include "runner_calls.h"
#include "tokenize/tokenize.h"
#include "core/log.h"
#include "core/util.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#define FAILED_OUTPUT_MAX (64 * 1024) /* stdout a failed invocation returns: failed_output */
#define RUNNER_SLACK_MS 30000 /* sandbox set-up, a wait for a free slot, the kill */
/* A runner that refuses connections is restarting, or gone and taken over
 * once its heartbeat is three periods old (invoke_takeover.c). */
#define RUNNER_AWAY_RETRY_S 5
#define MODEL_KEY_MAX 4096

/* The agent's secrets ('e'), for a call in a session the session's state
 * ('x'), and what the run request's files are made of (invoke_files.h): one
 * round trip for all. A secret's nonce and ciphertext are one cell: the
 * union would make a column of the nonce's BINARY(24) and the files' text a
 * wider BINARY, padded. */
static const char SQL_SECRETS_SESSION[] =
	"SELECT 'e', name, NULL, CONCAT(nonce, ciphertext), NULL FROM secrets WHERE agent_id = ?"
	" UNION ALL SELECT 'x', NULL, NULL, state, NULL FROM sessions WHERE agent_id = ? AND id = ?"
	" UNION ALL " AH_INVOKE_FILES_SQL;
typedef ah_invoke_in invoke_in;


/* ---- input ---- */

/* The prompt is bytes: NUL is allowed, so ah_field_str (which refuses NUL) is not
 * used; the cap counts bytes because that is what the sandbox receives. */
static void read_prompt(ah_req *r, json_object *o, invoke_in *in)
{
	json_object *v;
	size_t cap = (size_t)ah_settings_of(r->cfg)->invoke.max_prompt_bytes;
	if (!json_object_object_get_ex(o, "prompt", &v)) {
		ah_verr(r, "body", "prompt", "Field required", "missing");
	} else if (!v || !json_object_is_type(v, json_type_string)) {
		ah_verr(r, "body", "prompt", "Input should be a valid string", "string_type");
	} else if ((size_t)json_object_get_string_len(v) > cap) {
		ah_verr(r, "body", "prompt", ah_sprintf(r->arena, "String should have at most %zu bytes", cap),
		        "string_too_long");
	} else {
		in->prompt = json_object_get_string(v);
		in->prompt_len = (size_t)json_object_get_string_len(v);
	}
}

static int read_input(ah_req *r, const ah_agent *a, invoke_in *in)
{
	static const char *const fields[] = {"prompt", "session_id", "timeout_seconds", "async", "stream",
	                                     "webhook_url", NULL};
	bool has_hook;
	json_object *o;
	int rc = ah_body_object(r, &o, fields);
	if (rc != 0)
		return rc;
	read_prompt(r, o, in);
	if (ah_field_str(r, o, "session_id", AH_F_NULLABLE, 1, 128, &in->session_id, NULL) == 0 &&
	    in->session_id && !ah_session_id_valid(in->session_id))
		ah_verr(r, "body", "session_id", "String should match pattern '^[A-Za-z0-9._:-]{1,128}$'",
		        "string_pattern_mismatch");
	in->timeout_s = 0;
	ah_field_int(r, o, "timeout_seconds", AH_F_NULLABLE, 1, 600, &in->timeout_s, NULL);
	if (in->timeout_s == 0)
		in->timeout_s = a->timeout_seconds;
	/* Issue 28: a call is answered one way; both at once is a client's mistake. */
	ah_field_bool(r, o, "async", AH_F_NULLABLE, &in->async, NULL);
	ah_field_bool(r, o, "stream", AH_F_NULLABLE, &in->stream, NULL);
	if (in->async && in->stream)
		ah_verr(r, "body", "stream", "stream and async cannot both be true: a stream is answered"
		        " as the call runs, an asynchronous call at once", "stream_async_conflict");
	ah_webhook_url_field(r, o, &in->webhook_url, &has_hook);
	return ah_verr_reply(r);
}

/* ---- environment ---- */

/* The model-provider key from the configuration: a value, or a file holding it. */
static const char *model_key_value(ah_req *r)
{
	const ah_model_settings *m = &ah_settings_of(r->cfg)->model;
	const char *v = m->key_value, *path = m->key_file;
	if (*v || !*path)
		return v;
	FILE *f = fopen(path, "re");
	if (!f) {
		ah_log_warn("cannot read model_key_file %s", path);
		return "";
	}
	char *buf = ah_alloc(r->arena, MODEL_KEY_MAX + 1);
	size_t n = fread(buf, 1, MODEL_KEY_MAX, f);
	fclose(f);
	while (n > 0 && strchr(" \t\r\n", buf[n - 1]))
		n--;
	buf[n] = '\0';
	return buf;
}

/* A secret's cell (its nonce, then the ciphertext) decrypted into env. */
static void add_secret(ah_req *r, json_object *env, const char *agent_id, const char *name,
                       const unsigned char *cell, size_t len)
{
	char *plain;
	size_t n;
	if (len <= AH_NONCE_BYTES ||
	    ah_crypto_open(r->arena, &plain, &n, cell, cell + AH_NONCE_BYTES, len - AH_NONCE_BYTES) != 0) {
		ah_log_error("secret %s of agent %s does not decrypt; left out", name, agent_id);
		return;
	}
	json_object_object_add(env, name, json_object_new_string_len(plain, (int)n));
}

/* With the model gateway on, the runner keeps the key and hands out a token. */
static void add_model_key(ah_req *r, json_object *env)
{
	const ah_model_settings *m = &ah_settings_of(r->cfg)->model;
	const char *key = m->gateway ? "" : model_key_value(r);
	if (*key)
		ah_json_str(env, m->key_name, key);
}

/* The agent's secrets as they are now, into env; never logged. With a
 * session id, *state is that session's state (NULL: no such session yet).
 * The files' rows are left at the start of rows->v, rows->n of them. */
static int build_env(ah_req *r, const char *agent_id, const char *sid, json_object *env,
                     const char **state, ah_rows *rows)
{
	*state = NULL;
	if (ah_db_query(r->db, r->arena, rows, SQL_SECRETS_SESSION, "sssssss", agent_id, agent_id,
	                sid ? sid : "", agent_id, agent_id, sid ? sid : "", r->user->id) != 0)
		return AH_EFAIL;
	size_t nfiles = 0;
	for (size_t i = 0; i < rows->n; i++) {
		char kind = rows->v[i][0][0], **v = rows->v[i] + 1;
		if (kind == 'x')
			*state = v[2];
		else if (kind == 'e')
			add_secret(r, env, agent_id, v[0], (const unsigned char *)v[2], rows->len[i][3]);
		else /* the files' (invoke_files.h) */
			rows->v[nfiles++] = rows->v[i];
	}
	rows->n = nfiles;
	return 0;
}

/* An ephemeral call of an agent without attachments needs no more than its
 * lookup read (ah_agent_invoke_scope): the secrets and the user's quota left
 * for the files the call may leave (a files row 'q', as build_env's). False
 * when the call needs more or the secrets do not add up (their JSON cut at
 * group_concat_max_len): build_env then asks. */
static bool env_from_scope(ah_req *r, const char *agent_id, json_object *env, ah_rows *files)
{
	char *const *x = r->scope_extra;
	if (ah_cell_ll(x[AH_INV_X_ATTACH_N]) != 0)
		return false;
	size_t n = (size_t)ah_cell_ll(x[AH_INV_X_SECRETS_N]);
	json_object *list = n && x[AH_INV_X_SECRETS] ? json_tokener_parse(x[AH_INV_X_SECRETS]) : NULL;
	if (n && (!json_object_is_type(list, json_type_array) || json_object_array_length(list) != n)) {
		json_object_put(list);
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(list, i);
		const char *name = json_object_get_string(json_object_array_get_idx(e, 0));
		const char *hex = json_object_get_string(json_object_array_get_idx(e, 1));
		size_t hexlen = hex ? strlen(hex) : 0, len = 0;
		unsigned char *cell = ah_alloc(r->arena, hexlen / 2 + 1);
		if (!name || !hex || sodium_hex2bin(cell, hexlen / 2 + 1, hex, hexlen, NULL, &len, NULL) != 0)
			len = 0; /* not a secret's cell: add_secret says so */
		add_secret(r, env, agent_id, name ? name : "?", cell, len);
	}
	json_object_put(list);
	char **row = ah_alloc(r->arena, 5 * sizeof *row);
	row[0] = "q", row[1] = x[AH_INV_X_QUOTA_LEFT], row[2] = row[3] = row[4] = NULL;
	files->v = ah_alloc(r->arena, sizeof *files->v);
	files->v[0] = row;
	files->n = 1;
	return true;
}

/* ---- running ---- */

static json_object *run_request(ah_req *r, const ah_agent *a, const invoke_in *in, const char *inv_id,
                                json_object *env, json_object *budget)
{
	size_t cap = sodium_base64_ENCODED_LEN(in->prompt_len, sodium_base64_VARIANT_ORIGINAL);
	char *b64 = ah_alloc(r->arena, cap);
	sodium_bin2base64(b64, cap, (const unsigned char *)in->prompt, in->prompt_len,
	                  sodium_base64_VARIANT_ORIGINAL);
	json_object *q = ah_json_own(r, json_object_new_object());
	ah_json_str(q, "op", "run");
	ah_json_str(q, "invocation_id", inv_id);
	ah_json_str(q, "agent_id", a->id);
	if (a->runner_id)
		ah_json_str(q, "runner_id", a->runner_id);
	ah_json_str(q, "image", a->image_path);
	if (a->image_sha256)
		ah_json_str(q, "image_sha256", a->image_sha256);
	ah_json_str(q, "entrypoint", a->entrypoint);
	ah_json_str(q, "session", in->session_id);
	json_object_object_add(q, "env", json_object_get(env));
	ah_json_str(q, "stdin_b64", b64);
	ah_json_int(q, "timeout_ms", in->timeout_s * 1000);
	ah_json_int(q, "max_output_bytes", ah_settings_of(r->cfg)->invoke.max_output_bytes);
	/* Warm agents (issue 15): the runner keeps this many processes of this
	 * request's program and environment started, waiting for a prompt. */
	if (a->min_warm > 0)
		ah_json_int(q, "min_warm", a->min_warm);
	if (budget) /* the model gateway charges and stops at the budgets */
		json_object_object_add(q, "budget", json_object_get(budget));
	/* An egress allow-list (issue 32), as checked and stored by the API. */
	if (a->network)
		json_object_object_add(q, "network", ah_agent_network_json(a->network));
	return q;
}

static long long max_output(json_object *q)
{
	json_object *v = NULL;
	return json_object_object_get_ex(q, "max_output_bytes", &v) ? json_object_get_int64(v) : 0;
}

static void run_agent(ah_req *r, ah_call *c, ah_run_out *o)
{
	const ah_agent *a = c->a;
	const invoke_in *in = &c->in;
	const ah_invocation *inv = &c->inv;
	json_object *q = run_request(r, a, in, inv->id, c->env, ah_budget_spec(r, &c->budget)), *ans;
	long long out_cap = max_output(q);
	if (c->on_chunk)
		ah_json_bool(q, "stream", true);
	ah_invoke_files_request(r, c->files.v, c->files.n, q);
	c->tm.t_call = ah_mono_us();
	int rc = ah_runner_call_stream(r, q, &ans, (int)(in->timeout_s * 1000 + RUNNER_SLACK_MS),
	                               c->on_chunk, c->chunk_ctx);
	c->tm.t_answer = ah_mono_us();
	if (rc == AH_ETIMEOUT) {
		ah_log_error("inv=%s: no answer from the runner in time", inv->id);
		ah_run_timed_out(r, o, in->timeout_s);
	} else if (rc == AH_EBUSY) { /* never sent: nothing ran, nothing to record */
		o->http = 503;
		o->retry_after = RUNNER_AWAY_RETRY_S;
		o->detail = "The agent's runner cannot be reached; try again shortly (a runner "
		            "that is gone is replaced within a minute)";
	} else if (rc != 0) {
		ah_log_error("inv=%s: runner unreachable or answer unreadable", inv->id);
		ah_run_failed(r, o, "sandbox runner unavailable");
	} else {
		ah_run_answer(r, ans, in->timeout_s, out_cap, o);
		ah_inv_timing_runner(&c->tm, ans);
		o->files = ah_invoke_files_record(r, a, inv->session_id, ans, &o->files_error);
	}
}

/* ---- accounting and recording ---- */

/* What a failed invocation returns, and so is charged for: the same for every
 * kind of failure (non-zero exit, signal, out of memory, timeout, output over
 * the cap, sandbox or runner failure). The caller gets the start of what the
 * agent wrote to stdout, at most FAILED_OUTPUT_MAX bytes cut before a
 * character that would straddle the cut, or nothing when the agent never ran;
 * account() then prices the prompt and exactly this. Output the caller never
 * received is never charged: an agent stopped at the 10 MiB output cap costs
 * its prompt and 64 KiB, not 10 MiB. */
static void failed_output(ah_run_out *o)
{
	if (o->http == 200 || !o->out || o->out_len <= FAILED_OUTPUT_MAX)
		return;
	size_t n = FAILED_OUTPUT_MAX;
	for (int k = 0; k < 3 && n > 0 && ((unsigned char)o->out[n] & 0xC0) == 0x80; k++)
		n--;
	o->out_len = n;
}

/* A failure of an agent that wrote to stderr says where that is (issue 29:
 * a user otherwise has no way to learn why it failed). */
static void note_logs(ah_req *r, const ah_agent *a, const char *inv_id, ah_run_out *o)
{
	if (o->http == 200 || !o->err_log || !o->err_log_len)
		return;
	o->error = ah_sprintf(r->arena, "%s; its stderr is in the invocation's logs: GET /api/v1/agents/"
	                      "%s/invocations/%s/logs", o->error, a->slug, inv_id);
	if (o->http == 500)
		o->detail = ah_sprintf(r->arena, "Invocation failed: %s", o->error);
}

/* The finished call's record as its caller receives it (and a webhook). */
static json_object *call_json(ah_req *r, const ah_call *c)
{
	const ah_run_out *o = &c->o;
	json_object *res = ah_invocation_json(r, &c->inv, false);
	json_object_object_add(res, "files", o->files ? json_object_get(o->files) : json_object_new_array());
	return res;
}

int ah_call_reply(ah_req *r, const ah_call *c)
{
	const ah_run_out *o = &c->o;
	json_object *res = call_json(r, c);
	if (o->http == 200)
		return ah_reply_json(r, 200, res);
	json_object *body = json_object_new_object();
	ah_json_str(body, "detail", o->detail);
	json_object_object_add(body, "invocation", res);
	return ah_reply_json(r, o->http, body);
}

void ah_call_run(ah_req *r, ah_call *c)
{
	ah_run_out *o = &c->o;
	ah_invocation *inv = &c->inv;
	run_agent(r, c, o);
	if (o->http == 503) { /* nothing ran: no history entry, no usage */
		ah_budget_finish(r, &c->budget, "0", 0);
		return;
	}
	failed_output(o);
	note_logs(r, c->a, inv->id, o);
	ah_inv_timing_phases(&c->tm, c->tm.t_ran = ah_mono_us());
	inv->duration_ms = ah_now_ms() - c->start;
	inv->sandbox_id = o->sandbox_id;
	inv->response = o->out;
	inv->response_len = o->out_len;
	inv->input_tokens = (long long)c->in_tokens;
	inv->status = o->cancelled ? AH_INV_CANCELLED : o->http == 200 ? AH_INV_COMPLETED : AH_INV_FAILED;
	inv->error = o->error;
	inv->files_error = o->files_error;
	inv->model_input_tokens = o->model_in, inv->model_output_tokens = o->model_out;
	inv->model_cache_write_tokens = o->model_cache_write;
	inv->model_cache_read_tokens = o->model_cache_read;
	inv->model_cache_write_1h_tokens = o->model_cache_write_1h;
	ah_invocation_account(r, inv);
	inv->err_log = o->err_log, inv->err_log_len = o->err_log_len;
	inv->err_log_truncated = o->err_log_truncated;
	c->tm.us[AH_MX_PH_RECORD] = ah_mono_us() - c->tm.t_ran; /* kept: up to the write */
	inv->timing = ah_inv_timing_text(r, &c->tm);
	ah_invocation_record(r, c->a->id, inv, &c->budget, o->model_charged);
	/* The call's own webhook, else its agent's: every way a call finishes
	 * (plain, streamed, asynchronous, a schedule's) passes here. */
	const char *hook = c->in.webhook_url ? c->in.webhook_url : c->a->webhook_url;
	if (hook)
		ah_webhook_queue(r, c->a->id, inv->id, hook, ah_json_own(r, call_json(r, c)));
	/* The header's: everything before the answer, the budgets' charge too. */
	c->tm.us[AH_MX_PH_RECORD] = ah_mono_us() - c->tm.t_ran;
}

/* What the invoke route's lookup read besides the agent (ah_agent_invoke_scope):
 * the budgets into *lim and the runner's heartbeat age in ms; false (age -1)
 * when the request has none (a JWT, a schedule's call): then each is asked. */
static bool scope_read(ah_req *r, const ah_agent *a, ah_budget_limits *lim, long long *age_ms)
{
	char *const *x = r->scope_extra;
	*age_ms = -1;
	if (!x || r->scope != a)
		return false;
	*lim = (ah_budget_limits){x[AH_INV_X_USER_DAY], x[AH_INV_X_USER_MONTH], a->max_day, a->max_month,
	                          x[AH_INV_X_KEY_DAY], x[AH_INV_X_KEY_MONTH]};
	/* The heartbeat's time is the database's clock, the age this host's. A
	 * skew that makes it look old only costs the question the takeover then
	 * asks the database (in its clock); one that makes it look younger
	 * delays a takeover by the skew (hosts keep their clocks in sync, as
	 * the keys' expiry assumes); an age below zero is no answer. */
	int64_t beat;
	if (x[AH_INV_X_RUNNER_BEAT] && ah_db_time_ms(x[AH_INV_X_RUNNER_BEAT], &beat) == 0 &&
	    ah_now_ms() >= beat)
		*age_ms = ah_now_ms() - beat;
	return true;
}

/* The call as a client makes it and as the scheduler does (schedule_run.c):
 * one path through admission, environment, secrets and recording. */
int ah_invoke(ah_req *r, const char *schedule_id, const char **inv_id)
{
	const ah_agent *a;
	ah_call c = {.tm = {.t_req = r->start_us}};
	invoke_in *in = &c.in;
	int rc = ah_agent_load(r, &a);
	if (rc != 0 || (rc = read_input(r, a, in)) != 0)
		return rc;
	/* The contract: 409 unless active. A redeploy that failed leaves an agent
	 * with an image active on it (runner/jobs.c), so the old image serves. */
	if (a->status != AH_AGENT_ACTIVE)
		return ah_reply_error(r, 409, ah_sprintf(r->arena, "Agent is not active (status: %s)",
		                      ah_agent_status_names[a->status]));
	if (!a->image_path || !a->entrypoint)
		return ah_reply_error(r, 409, "Agent has no deployed image; deploy it again");
	ah_agent *moved;
	ah_budget_limits lim;
	long long age_ms;
	bool known = scope_read(r, a, &lim, &age_ms);
	const char *runner = ah_runner_takeover(r, a->id, a->runner_id, a->image_sha256 != NULL, age_ms);
	if (runner != a->runner_id) { /* its runner is gone: another one has it now */
		moved = ah_alloc(r->arena, sizeof *moved);
		*moved = *a;
		moved->runner_id = runner;
		a = moved;
	}
	c.a = a;
	c.start = ah_now_ms();
	c.inv = (ah_invocation){.id = ah_id_new(r->arena, "inv"), .created_at = ah_db_time(r->arena, c.start),
	                        .prompt = in->prompt, .prompt_len = in->prompt_len};
	c.inv.session_id = in->session_id ? in->session_id : ah_id_new(r->arena, "ses");
	c.inv.schedule_id = schedule_id;
	const char *state = NULL;
	json_object *env = json_object_new_object();
	c.env = ah_json_own(r, env);
	if (ah_tokenize_count(&c.in_tokens, in->prompt, in->prompt_len) != 0 ||
	    (!(known && !in->session_id && env_from_scope(r, a->id, env, &c.files)) &&
	     build_env(r, a->id, in->session_id, env, &state, &c.files) != 0))
		return AH_EFAIL;
	add_model_key(r, env); /* after the secrets: one of the same name gives way */
	if (in->session_id && (rc = ah_invoke_claim_session(r, a->id, in->session_id, state)) != 0)
		return rc;
	if ((rc = ah_budget_admit(r, a->id, known ? &lim : NULL, in->timeout_s, &c.budget)) != 0)
		return rc;
	if (in->async)
		return ah_invoke_async(r, &c);
	if (in->stream || ah_invoke_wants_stream(r))
		return ah_invoke_stream(r, &c);
	ah_call_run(r, &c);
	if (c.o.http == 503) {
		ah_header(r, "Retry-After", ah_sprintf(r->arena, "%lld", c.o.retry_after));
		return ah_reply_error(r, 503, c.o.detail);
	}
	if (inv_id)
		*inv_id = c.inv.id;
	ah_inv_timing_header(r, &c.tm);
	return ah_call_reply(r, &c);
}

static int invoke(ah_req *r)
{
	return ah_invoke(r, NULL, NULL);
}

const ah_route ah_invoke_routes[] = {
	{"POST", "/agents/{slug}/invoke", invoke, AH_R_INVOKE, 16 * 1024 * 1024, &ah_agent_invoke_scope},
	{NULL, NULL, NULL, 0, 0},
};
