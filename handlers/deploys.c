/* /agents/{slug}/deploys and /agents/{slug}/rollback: an agent's deploys as
 * records (schema/022_deploy_records.sql; the job's state and error are
 * deploy_jobs', joined), each one's build output, and the switch back to a
 * kept image without a rebuild. */
#include "agents.h"
#include "list.h"
#include "routes.h"
#include "runner_calls.h"
#include "core/log.h"
#include "core/redact.h"
#include "core/util.h"
#include "crypto/crypto.h"
#include "db/enums.h"

#include <stdio.h>
#include <string.h>

#define DEPLOY_COLS                                                                          \
	"d.id, d.created_at, d.source_type, d.git_repo_url, d.git_branch, d.git_commit,"          \
	" d.code_sha256, d.image_sha256, d.image_kept, d.user_id, d.api_key_id, d.api_key_name,"  \
	" d.started_at, d.activated_at, j.state, j.error, j.attempts,"                            \
	" IF(j.state IN (" AH_SQ(AH_JOB_S_DONE) ", " AH_SQ(AH_JOB_S_FAILED) "), j.updated_at, NULL),"                                 \
	" IF(j.state IN (" AH_SQ(AH_JOB_S_DONE) ", " AH_SQ(AH_JOB_S_FAILED) "), TIMESTAMPDIFF(MICROSECOND, COALESCE(d.started_at,"    \
	" d.created_at), j.updated_at) DIV 1000, NULL), d.image_path, d.entrypoint"
enum { D_ID, D_CREATED, D_TYPE, D_REPO, D_BRANCH, D_COMMIT, D_CODE, D_IMAGE, D_KEPT, D_USER,
       D_KEY, D_KEY_NAME, D_STARTED, D_ACTIVATED, D_STATE, D_ERROR, D_ATTEMPTS, D_FINISHED,
       D_DURATION, D_PATH, D_ENTRY };
#define DEPLOY_ORDER " ORDER BY d.created_at DESC, d.id DESC"
#define DEPLOY_JOIN " LEFT JOIN deploy_jobs j ON j.id = d.job_id"
static const char SQL_PAGE[] =
	"SELECT " DEPLOY_COLS " FROM (SELECT id FROM deploys WHERE agent_id = ?"
	" ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?) k JOIN deploys d ON d.id = k.id"
	DEPLOY_JOIN DEPLOY_ORDER;
static const char SQL_AFTER[] =
	"SELECT " DEPLOY_COLS " FROM deploys d FORCE INDEX (deploys_agent_created)" DEPLOY_JOIN
	" WHERE d.agent_id = ? AND d.created_at <= ? AND (d.created_at < ? OR d.id < ?)"
	DEPLOY_ORDER " LIMIT ?";
static const char SQL_COUNT[] = "SELECT COUNT(*) FROM deploys WHERE agent_id = ?";
static const char SQL_ONE[] =
	"SELECT " DEPLOY_COLS " FROM deploys d" DEPLOY_JOIN " WHERE d.agent_id = ? AND d.id = ?";
/* The deploy the agent ran before its current image: the last activated other one. */
static const char SQL_PREVIOUS[] =
	"SELECT " DEPLOY_COLS " FROM deploys d" DEPLOY_JOIN " WHERE d.agent_id = ?"
	" AND d.activated_at IS NOT NULL AND d.image_path <> COALESCE(?, '')"
	" ORDER BY d.activated_at DESC LIMIT 1";
static const char SQL_LOG[] =
	"SELECT d.log, d.log_bytes, j.state FROM deploys d" DEPLOY_JOIN " WHERE d.agent_id = ? AND d.id = ?";
static const char SQL_SECRETS[] = "SELECT nonce, ciphertext FROM secrets WHERE agent_id = ?";
/* Only while no deploy is queued or running and the image is still kept:
 * both can change between the checks and here. */
static const char SQL_SWITCH[] =
	"UPDATE agents SET status = " AH_SQ(AH_AGENT_S_ACTIVE) ", status_message = NULL, image_path = ?, image_sha256 = ?,"
	" entrypoint = ?, sandbox_id = ?, updated_at = NOW(3) WHERE id = ? AND status <> " AH_SQ(AH_AGENT_S_DEPLOYING) 
	" AND NOT EXISTS (SELECT 1 FROM deploy_jobs WHERE agent_id = ? AND state IN (" AH_SQ(AH_JOB_S_QUEUED) ", " AH_SQ(AH_JOB_S_RUNNING) "))"
	" AND EXISTS (SELECT 1 FROM deploys WHERE id = ? AND agent_id = ? AND image_kept = 1)";
static const char SQL_ACTIVATED[] = "UPDATE deploys SET activated_at = NOW(3) WHERE id = ?";
static const char SQL_END_SESSIONS[] =
	"UPDATE sessions SET state = " AH_SQ(AH_SESSION_S_ENDED) ", sandbox_id = NULL WHERE agent_id = ? AND state = " AH_SQ(AH_SESSION_S_ACTIVE);

#define LOG_MAX_SHOWN 262144

static const char *status_of(const char *state)
{
	if (!state)
		return "unknown"; /* its job is gone */
	if (strcmp(state, "done") == 0)
		return "succeeded";
	return state; /* queued, running, failed */
}

static json_object *deploy_json(ah_req *r, const ah_rows *rows, size_t i)
{
	const ah_agent *a = r->scope;
	const char *path = ah_cell(rows, i, D_PATH), *state = ah_cell(rows, i, D_STATE);
	json_object *o = json_object_new_object(), *src = json_object_new_object();
	json_object *by = json_object_new_object();
	ah_json_str(o, "id", ah_cell(rows, i, D_ID));
	ah_json_str(o, "status", status_of(state));
	ah_json_bool(o, "active", a && path && a->image_path && strcmp(path, a->image_path) == 0);
	ah_json_str(src, "type", ah_cell(rows, i, D_TYPE));
	if (strcmp(ah_cell(rows, i, D_TYPE), "git") == 0) {
		ah_json_str(src, "git_repo_url", ah_cell(rows, i, D_REPO));
		ah_json_str(src, "git_branch", ah_cell(rows, i, D_BRANCH));
		ah_json_str(src, "git_commit", ah_cell(rows, i, D_COMMIT));
	} else {
		ah_json_str(src, "code_sha256", ah_cell(rows, i, D_CODE));
	}
	json_object_object_add(o, "source", src);
	ah_json_str(o, "image_sha256", ah_cell(rows, i, D_IMAGE));
	ah_json_bool(o, "image_kept", strcmp(ah_cell(rows, i, D_KEPT), "1") == 0);
	ah_json_str(o, "error", state && strcmp(state, "failed") == 0 ? ah_cell(rows, i, D_ERROR) : NULL);
	ah_json_int(o, "attempts", ah_cell(rows, i, D_ATTEMPTS) ? ah_cell_ll(ah_cell(rows, i, D_ATTEMPTS)) : 0);
	ah_json_time(r, o, "created_at", ah_cell(rows, i, D_CREATED));
	ah_json_time(r, o, "started_at", ah_cell(rows, i, D_STARTED));
	ah_json_time(r, o, "finished_at", ah_cell(rows, i, D_FINISHED));
	if (ah_cell(rows, i, D_DURATION))
		ah_json_int(o, "duration_ms", ah_cell_ll(ah_cell(rows, i, D_DURATION)));
	else
		json_object_object_add(o, "duration_ms", NULL);
	ah_json_time(r, o, "activated_at", ah_cell(rows, i, D_ACTIVATED));
	ah_json_str(by, "user_id", ah_cell(rows, i, D_USER));
	ah_json_str(by, "api_key_id", ah_cell(rows, i, D_KEY));
	ah_json_str(by, "api_key_name", ah_cell(rows, i, D_KEY_NAME));
	json_object_object_add(o, "started_by", by);
	return o;
}

static int list_deploys(ah_req *r)
{
	const ah_agent *a;
	int rc = ah_agent_load(r, &a);
	static const ah_list list = {.page_sql = SQL_PAGE, .after_sql = SQL_AFTER, .count_sql = SQL_COUNT,
	                             .time_col = D_CREATED, .id_col = D_ID, .to_json = deploy_json};
	return rc ? rc : ah_list_keyset(r, &list, a->id, NULL, 0);
}

/* One deploy of the agent; 404 (answered) for another agent's or none. */
static int load_deploy(ah_req *r, const ah_agent *a, const char *id, ah_rows *out)
{
	if (ah_db_query(r->db, r->arena, out, SQL_ONE, "ss", a->id, id) != 0)
		return AH_EFAIL;
	return out->n == 1 ? 0 : (ah_reply_error(r, 404, "Deploy not found"), AH_EDONE);
}

static int get_deploy(ah_req *r)
{
	const ah_agent *a;
	ah_rows rows;
	int rc = ah_agent_load(r, &a);
	if (rc == 0)
		rc = load_deploy(r, a, r->params[1], &rows);
	return rc ? rc : ah_reply_json(r, 200, deploy_json(r, &rows, 0));
}

/* ---- the build's output ---- */

/* The model key as the invoke path reads it (value, or the file's first line). */
static const char *model_key(ah_req *r)
{
	const ah_model_settings *m = &ah_settings_of(r->cfg)->model;
	const char *v = m->key_value, *path = m->key_file;
	if (*v || !*path)
		return v;
	FILE *f = fopen(path, "re");
	if (!f)
		return "";
	char *buf = ah_alloc(r->arena, 4097);
	size_t n = fread(buf, 1, 4096, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	return buf;
}

typedef struct needles {
	const char *v[64];
	size_t len[64], n;
} needles;

static void add_needle(needles *k, const char *v, size_t len)
{
	/* Shorter values would blank out ordinary text; documented. */
	if (len >= 4 && k->n < sizeof(k->v) / sizeof(k->v[0])) {
		k->v[k->n] = v;
		k->len[k->n++] = len;
	}
}

/* The agent's secret values and the model key: what the log must not show. */
static int load_needles(ah_req *r, const char *agent_id, needles *k)
{
	ah_rows rows;
	k->n = 0;
	if (ah_db_query(r->db, r->arena, &rows, SQL_SECRETS, "s", agent_id) != 0)
		return AH_EFAIL;
	for (size_t i = 0; i < rows.n; i++) {
		char *plain;
		size_t len;
		if (rows.len[i][0] == AH_NONCE_BYTES &&
		    ah_crypto_open(r->arena, &plain, &len, (const unsigned char *)rows.v[i][0],
		                   (const unsigned char *)rows.v[i][1], rows.len[i][1]) == 0)
			add_needle(k, plain, len);
	}
	const char *key = model_key(r);
	add_needle(k, key, strlen(key));
	return 0;
}

/* What passes the filter, into an arena buffer sized for the worst case. */
struct out_buf {
	char *p;
	size_t n, cap;
};

static void to_buf(void *ctx, const char *b, size_t n)
{
	struct out_buf *o = ctx;
	if (n > o->cap - o->n)
		n = o->cap - o->n; /* cannot happen: cap is the worst case */
	memcpy(o->p + o->n, b, n);
	o->n += n;
}

/* Each needle's occurrences become [redacted] (core/redact's filter, as for
 * an invocation's stderr); done when read (not when written) so that a
 * secret set after the build is caught all the same. A needle is at least 4
 * bytes and the mark 10, so 3 bytes of room per byte (and one mark for a
 * secret's start at the very end) always suffice. */
static char *redact(ah_req *r, const char *s, size_t len, const needles *k, size_t *outlen)
{
	struct out_buf o = {ah_alloc(r->arena, len * 3 + 32), 0, len * 3 + 31};
	ah_redact *f = ah_redact_new(k->v, k->n, 0, to_buf, &o);
	if (!f)
		return NULL;
	ah_redact_write(f, s, len);
	ah_redact_end(f);
	ah_redact_free(f);
	o.p[o.n] = '\0';
	*outlen = o.n;
	return o.p;
}

/* Where a redacted log whose head was cut starts: past what may be the end
 * of a secret cut in two (which no needle matches), i.e. the longest
 * needle's length - 1, or less when a [redacted] mark comes first; then past
 * the rest of its first line when that is short. */
static size_t cut_start(const char *s, size_t len, const needles *k)
{
	size_t skip = 0;
	for (size_t j = 0; j < k->n; j++)
		if (k->len[j] - 1 > skip)
			skip = k->len[j] - 1;
	if (skip > len)
		skip = len;
	const char *mark = memmem(s, skip, AH_REDACT_MARK, sizeof AH_REDACT_MARK - 1);
	if (mark)
		skip = (size_t)(mark - s);
	const char *nl = memchr(s + skip, '\n', len - skip < 1024 ? len - skip : 1024);
	return nl ? (size_t)(nl - s) + 1 : skip;
}

static int get_logs(ah_req *r)
{
	const ah_agent *a;
	ah_rows rows;
	needles k;
	int rc = ah_agent_load(r, &a);
	if (rc != 0)
		return rc;
	if (ah_db_query(r->db, r->arena, &rows, SQL_LOG, "ss", a->id, r->params[1]) != 0 ||
	    load_needles(r, a->id, &k) != 0)
		return AH_EFAIL;
	if (rows.n != 1)
		return ah_reply_error(r, 404, "Deploy not found");
	size_t len = rows.v[0][0] ? rows.len[0][0] : 0, rlen = 0, clean_len = 0;
	long long bytes = ah_cell_ll(ah_cell(&rows, 0, 1));
	const char *raw = rows.v[0][0] ? rows.v[0][0] : "";
	char *text = redact(r, raw, len, &k, &rlen);
	if (!text)
		return AH_EFAIL;
	size_t from = bytes > (long long)len ? cut_start(text, rlen, &k) : 0;
	text += from;
	rlen -= from;
	/* The cut at 256 KiB may have split a UTF-8 sequence; npm may write anything. */
	const char *clean = ah_utf8_repair(r->arena, text, rlen, &clean_len);
	const char *state = ah_cell(&rows, 0, 2);
	json_object *o = json_object_new_object();
	ah_json_str(o, "deploy_id", r->params[1]);
	ah_json_str(o, "status", status_of(state));
	ah_json_bool(o, "done", !state || strcmp(state, "done") == 0 || strcmp(state, "failed") == 0);
	json_object_object_add(o, "log", json_object_new_string_len(clean, (int)clean_len));
	ah_json_int(o, "bytes", bytes);
	ah_json_bool(o, "truncated", bytes > (long long)len);
	return ah_reply_json(r, 200, o);
}

/* ---- rollback ---- */

static const char *const ROLLBACK_FIELDS[] = {"deploy_id", NULL};

/* The deploy to go back to (answered 404/409 here when there is none). */
static int pick_target(ah_req *r, const ah_agent *a, const char *id, ah_rows *rows)
{
	if (id)
		return load_deploy(r, a, id, rows);
	if (ah_db_query(r->db, r->arena, rows, SQL_PREVIOUS, "ss", a->id, a->image_path) != 0)
		return AH_EFAIL;
	if (rows->n == 0)
		return ah_reply_error(r, 409, "No earlier deploy of this agent to roll back to"), AH_EDONE;
	return 0;
}

/* Why the target cannot be switched to, or NULL. */
static const char *refusal(ah_req *r, const ah_agent *a, const ah_rows *rows)
{
	const char *id = ah_cell(rows, 0, D_ID), *path = ah_cell(rows, 0, D_PATH);
	if (!path)
		return ah_sprintf(r->arena, "Deploy %s did not succeed: it has no image to roll back to", id);
	if (a->image_path && strcmp(path, a->image_path) == 0 && a->status == AH_AGENT_ACTIVE)
		return ah_sprintf(r->arena, "Deploy %s is already the agent's active deploy", id);
	if (strcmp(ah_cell(rows, 0, D_KEPT), "1") != 0)
		return ah_sprintf(r->arena, "The image of deploy %s is no longer kept (an agent keeps the "
		                  "images of its last %lld deploys: deploy_images_kept); deploy again instead",
		                  id, ah_settings_of(r->cfg)->deploy.images_kept);
	return NULL;
}

/* One transaction: 0, AH_ECONFLICT (a deploy started, or the image went) or AH_EFAIL. */
static int switch_to(ah_req *r, const ah_agent *a, const ah_rows *rows)
{
	unsigned long long n = 0;
	const char *id = ah_cell(rows, 0, D_ID);
	if (ah_db_begin(r->db) != 0)
		return AH_EFAIL;
	int rc = ah_db_exec(r->db, &n, SQL_SWITCH, "ssssssss", ah_cell(rows, 0, D_PATH),
	                    ah_cell(rows, 0, D_IMAGE), ah_cell(rows, 0, D_ENTRY),
	                    ah_id_new(r->arena, "sbx"), a->id, a->id, id, a->id);
	if (rc == 0 && n == 0)
		rc = AH_ECONFLICT;
	if (rc == 0)
		rc = ah_db_exec(r->db, NULL, SQL_ACTIVATED, "s", id);
	if (rc == 0)
		rc = ah_db_exec(r->db, NULL, SQL_END_SESSIONS, "s", a->id);
	if (rc == 0)
		rc = ah_db_commit(r->db);
	if (rc != 0)
		ah_db_rollback(r->db);
	return rc;
}

static int rollback(ah_req *r)
{
	const ah_agent *a;
	json_object *o = NULL;
	const char *id = NULL;
	ah_rows rows;
	int rc = ah_agent_load(r, &a);
	if (rc != 0)
		return rc;
	if (r->body_len > 0) { /* the body is optional: {} or nothing rolls back one */
		if ((rc = ah_body_object(r, &o, ROLLBACK_FIELDS)) != 0)
			return rc;
		ah_field_str(r, o, "deploy_id", AH_F_NULLABLE, 1, 32, &id, NULL);
		if (ah_verr_reply(r) != 0)
			return AH_EDONE;
	}
	if (a->status == AH_AGENT_DEPLOYING)
		return ah_reply_error(r, 409, "A deploy is running for this agent; roll back after it ends");
	if ((rc = pick_target(r, a, id, &rows)) != 0)
		return rc;
	const char *why = refusal(r, a, &rows);
	if (why)
		return ah_reply_error(r, 409, why);
	rc = switch_to(r, a, &rows);
	if (rc == AH_ECONFLICT)
		return ah_reply_error(r, 409, "A deploy of this agent started, or the image was released, "
		                      "during the rollback; nothing was changed");
	if (rc != 0)
		return rc;
	/* As after a redeploy: the warm processes and session sandboxes of the
	 * image we left go (a runner that cannot be reached never hands one out:
	 * it compares the image of each with the call's). */
	const char *left = a->image_path && strcmp(a->image_path, ah_cell(&rows, 0, D_PATH)) != 0
	                   ? a->image_path : NULL;
	if (a->runner_id && *a->runner_id && ah_runner_left_image(r, a->id, a->runner_id, false, left) != 0)
		ah_log_warn("rollback of agent %s: its runner did not drop the old sandboxes", a->id);
	ah_log_info("agent %s rolled back to deploy %s", a->id, ah_cell(&rows, 0, D_ID));
	if (load_deploy(r, a, ah_cell(&rows, 0, D_ID), &rows) != 0)
		return AH_EFAIL;
	/* r->scope is the agent as the request found it: the switch made this one active. */
	json_object *rec = deploy_json(r, &rows, 0);
	ah_json_bool(rec, "active", true);
	return ah_reply_json(r, 200, rec);
}

const ah_route ah_deploys_routes[] = {
	{"GET", "/agents/{slug}/deploys", list_deploys, 0, 0, AH_AGENT_SCOPE},
	{"GET", "/agents/{slug}/deploys/{id}", get_deploy, 0, 0, AH_AGENT_SCOPE},
	{"GET", "/agents/{slug}/deploys/{id}/logs", get_logs, 0, 0, AH_AGENT_SCOPE},
	{"POST", "/agents/{slug}/rollback", rollback, 0, 0, AH_AGENT_SCOPE},
	{NULL, NULL, NULL, 0, 0},
};
