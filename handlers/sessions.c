/* /agents/{slug}/sessions and /agents/{slug}/invocations: the sessions whose
 * sandboxes keep state between calls, and the invocation history, newest first.
 * Also the contract's invocation result, shared with invoke.c. */
#include "agents.h"
#include "files_api.h"
#include "invocations.h"
#include "list.h"
#include "routes.h"
#include "runner_calls.h"
#include "core/log.h"
#include "core/util.h"
#include "db/enums.h"
#include "db/record.h"

#include <string.h>

/* A session as the API lists it. */
typedef struct ah_session {
	const char *id, *sandbox_id, *created_at, *last_invoked_at;
	long long invocation_count;
} ah_session;

#define SESSION_COLS "id, sandbox_id, created_at, last_invoked_at, invocation_count"
static const ah_col SESSION_COLUMNS[] = {
	AH_COL_S("id", ah_session, id),
	AH_COL_S("sandbox_id", ah_session, sandbox_id),
	AH_COL_S("created_at", ah_session, created_at),
	AH_COL_S("last_invoked_at", ah_session, last_invoked_at),
	AH_COL_I("invocation_count", ah_session, invocation_count, 0),
};
#define SESSION_NCOLS (sizeof(SESSION_COLUMNS) / sizeof(SESSION_COLUMNS[0]))
/* A session's call counts are session_calls' (schema/033): a session not
 * called yet has no row there. */
#define SESSION_COLS_S "s.id, s.sandbox_id, s.created_at, c.last_invoked_at, COALESCE(c.invocation_count, 0)"
#define SESSION_CALLS " LEFT JOIN session_calls c ON c.agent_id = s.agent_id AND c.id = s.id"
enum { S_ID, S_SANDBOX, S_CREATED };

/* Newest first by (created_at, id): offset pages take the ids from the
 * index alone and read only the page's rows (a deferred join), cursor pages
 * start right after the cursor's key. */
#define SESSIONS_ORDER " ORDER BY s.created_at DESC, s.id DESC"
static const char SQL_SESSIONS[] =
	"SELECT " SESSION_COLS_S " FROM (SELECT agent_id, id FROM sessions WHERE agent_id = ?"
	" ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?) k"
	" JOIN sessions s ON s.agent_id = k.agent_id AND s.id = k.id" SESSION_CALLS SESSIONS_ORDER;
static const char SQL_SESSIONS_REV[] =
	"SELECT " SESSION_COLS_S " FROM (SELECT agent_id, id FROM sessions WHERE agent_id = ?"
	" ORDER BY created_at, id LIMIT ? OFFSET ?) k"
	" JOIN sessions s ON s.agent_id = k.agent_id AND s.id = k.id" SESSION_CALLS SESSIONS_ORDER;
static const char SQL_SESSIONS_AFTER[] =
	"SELECT " SESSION_COLS_S " FROM sessions s FORCE INDEX (sessions_agent_created)" SESSION_CALLS " WHERE s.agent_id = ?"
	" AND s.created_at <= ? AND (s.created_at < ? OR s.id < ?)" SESSIONS_ORDER " LIMIT ?";
static const char SQL_SESSION_GET[] = "SELECT 1 FROM sessions WHERE agent_id = ? AND id = ?";
static const char SQL_SESSION_DELETE[] = "DELETE FROM sessions WHERE agent_id = ? AND id = ?";
#define HISTORY_COLS AH_HISTORY_COLS
#define HISTORY_ORDER " ORDER BY i.created_at DESC, i.id DESC"
static const char SQL_HISTORY[] =
	"SELECT " HISTORY_COLS " FROM (SELECT id FROM invocations WHERE agent_id = ?"
	" ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?) k"
	" JOIN invocations i ON i.id = k.id" HISTORY_ORDER;
static const char SQL_HISTORY_REV[] =
	"SELECT " HISTORY_COLS " FROM (SELECT id FROM invocations WHERE agent_id = ?"
	" ORDER BY created_at, id LIMIT ? OFFSET ?) k"
	" JOIN invocations i ON i.id = k.id" HISTORY_ORDER;
/* A deep offset by schema/017's hours: the newest hour at which the running
 * count from the top passes the offset, as its end (the bound) and the rows
 * of the newer hours; the page is then a walk within that hour. */
static const char SQL_HISTORY_LOCATE[] =
	"SELECT DATE_FORMAT(hour + INTERVAL 1 HOUR, '%Y-%m-%d %H:%i:%s'), upto - n FROM"
	" (SELECT hour, n, SUM(n) OVER (ORDER BY hour DESC ROWS UNBOUNDED PRECEDING) AS upto"
	" FROM history_hours WHERE agent_id = ?) h WHERE upto > ? ORDER BY hour DESC LIMIT 1";
/* FORCE INDEX as in after_sql: a table of many agents' rows otherwise may
 * make MariaDB walk invocations_created across all of them. */
static const char SQL_HISTORY_BELOW[] =
	"SELECT " HISTORY_COLS " FROM (SELECT id FROM invocations FORCE INDEX (invocations_agent)"
	" WHERE agent_id = ? AND created_at < ?"
	" ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?) k"
	" JOIN invocations i ON i.id = k.id" HISTORY_ORDER;
static const char SQL_HISTORY_AFTER[] =
	"SELECT " HISTORY_COLS " FROM invocations i FORCE INDEX (invocations_agent) WHERE i.agent_id = ?"
	" AND i.created_at <= ? AND (i.created_at < ? OR i.id < ?)" HISTORY_ORDER " LIMIT ?";

enum { H_ID, H_SESSION, H_SANDBOX, H_PROMPT, H_RESPONSE, H_IN, H_OUT, H_COST, H_DURATION,
       H_STATUS, H_ERROR, H_CREATED, H_MODEL_IN, H_MODEL_OUT, H_PROMPT_SHA, H_RESPONSE_SHA,
       H_FILES_ERROR, H_SCHEDULE, H_TIMING };

/* ---- the invocation result ---- */

const char *const ah_invocation_status_names[] = {
	[AH_INV_COMPLETED] = AH_INV_S_COMPLETED, [AH_INV_FAILED] = AH_INV_S_FAILED,
	[AH_INV_CANCELLED] = AH_INV_S_CANCELLED, [AH_INV_CANCELLED + 1] = NULL};

/* A status the schema gains before this code knows it is shown as "failed":
 * never claim success that was not seen. */
static ah_invocation_status status_of(const char *s)
{
	int v = ah_enum_find(ah_invocation_status_names, s);
	return v < 0 ? AH_INV_FAILED : (ah_invocation_status)v;
}

json_object *ah_invocation_json(ah_req *r, const ah_invocation *inv, bool with_prompt)
{
	json_object *o = json_object_new_object();
	ah_json_str(o, "invocation_id", inv->id);
	ah_json_str(o, "session_id", inv->session_id);
	ah_json_str(o, "sandbox_id", inv->sandbox_id);
	if (inv->response) {
		size_t n;
		const char *s = ah_utf8_repair(r->arena, inv->response, inv->response_len, &n);
		json_object_object_add(o, "response_content", json_object_new_string_len(s, (int)n));
	} else {
		json_object_object_add(o, "response_content", NULL);
	}
	ah_json_int(o, "input_tokens", inv->input_tokens);
	ah_json_int(o, "output_tokens", inv->output_tokens);
	json_object_object_add(o, "total_cost_usd", ah_money_json(r->arena, inv->cost));
	ah_json_int(o, "duration_ms", inv->duration_ms);
	/* Beyond the contract, so only where the model gateway measured them: a
	 * result without the gateway is exactly the contract's. */
	if (inv->model_input_tokens && inv->model_output_tokens) {
		ah_json_int(o, "model_input_tokens", ah_cell_ll(inv->model_input_tokens));
		ah_json_int(o, "model_output_tokens", ah_cell_ll(inv->model_output_tokens));
	}
	ah_json_str(o, "status", ah_invocation_status_names[inv->status]);
	ah_json_str(o, "error", inv->error);
	/* Only when some of the agent's files were not kept: a result without
	 * it is exactly the contract's. */
	if (inv->files_error)
		ah_json_str(o, "files_error", inv->files_error);
	/* What started it: a client's call, or a schedule (issue 32). */
	ah_json_str(o, "trigger", inv->schedule_id ? AH_TRIGGER_S_SCHEDULE : AH_TRIGGER_S_API);
	if (inv->schedule_id)
		ah_json_str(o, "schedule_id", inv->schedule_id);
	ah_json_time(r, o, "created_at", inv->created_at);
	/* Recorded since issue 31: older rows have none. */
	json_object *timing = inv->timing ? json_tokener_parse(inv->timing) : NULL;
	if (timing)
		json_object_object_add(o, "timing", timing);
	if (with_prompt) {
		/* Prompts arrived as JSON strings, so they are valid UTF-8 already. */
		size_t n;
		const char *s = ah_utf8_repair(r->arena, inv->prompt ? inv->prompt : "", inv->prompt_len, &n);
		json_object_object_add(o, "prompt", json_object_new_string_len(s, (int)n));
	}
	return o;
}

/* ---- handlers ---- */

static json_object *session_json(ah_req *r, const ah_rows *rows, size_t i)
{
	static bool checked;
	ah_session s;
	AH_RECORD_CHECK(checked, SESSION_COLUMNS, SESSION_NCOLS, SESSION_COLS);
	ah_record_fill(&s, SESSION_COLUMNS, SESSION_NCOLS, rows->v[i]);
	json_object *o = json_object_new_object();
	ah_json_str(o, "id", s.id);
	ah_json_str(o, "sandbox_id", s.sandbox_id);
	ah_json_time(r, o, "created_at", s.created_at);
	ah_json_time(r, o, "last_invoked_at", s.last_invoked_at);
	ah_json_int(o, "invocation_count", s.invocation_count);
	return o;
}

static int list_sessions(ah_req *r)
{
	const ah_agent *a;
	int rc = ah_agent_load(r, &a);
	static const ah_list list = {.page_sql = SQL_SESSIONS, .after_sql = SQL_SESSIONS_AFTER,
	                             .rev_sql = SQL_SESSIONS_REV, .count_kind = "ses", .time_col = S_CREATED,
	                             .id_col = S_ID, .to_json = session_json};
	return rc ? rc : ah_list_keyset(r, &list, a->id, NULL, 0);
}

/* Asks the runner to destroy the session's sandbox; 0 when it did. */
static int destroy_session_sandbox(ah_req *r, const char *agent_id, const char *session)
{
	json_object *req = ah_json_own(r, json_object_new_object()), *resp, *ok;
	ah_json_str(req, "op", "destroy_session");
	ah_json_str(req, "agent_id", agent_id);
	ah_json_str(req, "session", session);
	if (ah_runner_call(r, req, &resp, 30000) != 0)
		return AH_EFAIL;
	if (!json_object_object_get_ex(resp, "ok", &ok) || !json_object_get_boolean(ok))
		return AH_EFAIL;
	return 0;
}

static int delete_session(ah_req *r)
{
	const ah_agent *a;
	ah_rows rows;
	int rc = ah_agent_load(r, &a);
	if (rc != 0)
		return rc;
	if (ah_db_query(r->db, r->arena, &rows, SQL_SESSION_GET, "ss", a->id, r->params[1]) != 0)
		return AH_EFAIL;
	if (rows.n == 0)
		return ah_reply_error(r, 404, "Session not found");
	/* The sandbox first: a row deleted while its sandbox lives would leak it. */
	if (destroy_session_sandbox(r, a->id, r->params[1]) != 0)
		return ah_reply_error(r, 503, "The sandbox runner is not reachable; try again");
	if (ah_db_exec(r->db, NULL, SQL_SESSION_DELETE, "ss", a->id, r->params[1]) != 0)
		return AH_EFAIL;
	return ah_reply_no_content(r);
}

/* A prompt or response kept in the file store (invoke_record.c), read back;
 * "" (logged) when its blob cannot be read. */
static void unspill(ah_req *r, const char *sha, const char **bytes, size_t *len)
{
	ah_err err = {0};
	const ah_store *s = ah_files_store();
	char *b = s ? ah_history_blob_get(s, r->arena, sha, len, &err) : NULL;
	if (b) {
		*bytes = b;
		return;
	}
	ah_log_error("history blob %s: %s", sha, s ? err.msg : "no file store");
	r->partial = true;
	*bytes = "";
	*len = 0;
}

static json_object *history_json(ah_req *r, const ah_rows *rows, size_t i)
{
	char **v = rows->v[i];
	ah_invocation inv = {
		.id = v[H_ID], .session_id = v[H_SESSION], .sandbox_id = v[H_SANDBOX],
		.status = status_of(v[H_STATUS]), .error = v[H_ERROR], .created_at = v[H_CREATED], .cost = v[H_COST],
		.response = v[H_RESPONSE], .response_len = rows->len[i][H_RESPONSE],
		.prompt = v[H_PROMPT], .prompt_len = rows->len[i][H_PROMPT],
		.input_tokens = ah_cell_ll(v[H_IN]), .output_tokens = ah_cell_ll(v[H_OUT]),
		.duration_ms = ah_cell_ll(v[H_DURATION]),
		.model_input_tokens = v[H_MODEL_IN], .model_output_tokens = v[H_MODEL_OUT],
		.files_error = v[H_FILES_ERROR], .schedule_id = v[H_SCHEDULE], .timing = v[H_TIMING],
	};
	if (v[H_PROMPT_SHA])
		unspill(r, v[H_PROMPT_SHA], &inv.prompt, &inv.prompt_len);
	if (v[H_RESPONSE_SHA])
		unspill(r, v[H_RESPONSE_SHA], &inv.response, &inv.response_len);
	return ah_invocation_json(r, &inv, true);
}

json_object *ah_invocation_row_json(ah_req *r, const ah_rows *rows, size_t i)
{
	return history_json(r, rows, i);
}

static int list_invocations(ah_req *r)
{
	const ah_agent *a;
	int rc = ah_agent_load(r, &a);
	static const ah_list list = {.page_sql = SQL_HISTORY, .after_sql = SQL_HISTORY_AFTER,
	                             .rev_sql = SQL_HISTORY_REV, .count_kind = "inv", .time_col = H_CREATED,
	                             .locate_sql = SQL_HISTORY_LOCATE, .below_sql = SQL_HISTORY_BELOW,
	                             .id_col = H_ID, .to_json = history_json, .scope_counted = true};
	return rc ? rc : ah_list_keyset(r, &list, a->id, NULL, 0);
}

const ah_route ah_sessions_routes[] = {
	{"GET", "/agents/{slug}/sessions", list_sessions, 0, 0, AH_AGENT_SCOPE},
	{"DELETE", "/agents/{slug}/sessions/{id}", delete_session, 0, 0, AH_AGENT_SCOPE},
	{"GET", "/agents/{slug}/invocations", list_invocations, 0, 0, &ah_agent_history_scope},
	{NULL, NULL, NULL, 0, 0},
};
