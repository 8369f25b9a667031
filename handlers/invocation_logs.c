/* GET /agents/{slug}/invocations/{id}/logs (issue 29): what an invocation's
 * agent wrote to stderr, its last 64 KiB, as the runner kept it (the agent's
 * secrets, the model key and the gateway token replaced by "[redacted]"
 * before anything was stored: core/redact.h). Recorded with the history row,
 * in its transaction and round trip (invoke_record.c, schema/032), so it
 * costs no commit of its own; gone with it (schema/023_invocation_logs.sql). An invocation
 * of another agent, or of another user's agent, is 404 like an unknown one. */
#include "agents.h"
#include "invocations.h"
#include "routes.h"
#include "core/log.h"
#include "core/util.h"

#include <string.h>

/* The invocation's row decides 404; its logs row may be absent (no stderr). */
static const char SQL_LOGS_GET[] =
	"SELECT i.id, l.stderr, l.truncated FROM invocations i"
	" LEFT JOIN invocation_logs l ON l.invocation_id = i.id WHERE i.id = ? AND i.agent_id = ?";

/* JSON, like every other answer: "logs" is text (bytes that are not UTF-8
 * shown as U+FFFD), "truncated" says that stderr was longer than what is kept
 * (it is its end). */
static int get_logs(ah_req *r)
{
	const ah_agent *a;
	ah_rows rows;
	int rc = ah_agent_load(r, &a);
	if (rc != 0)
		return rc;
	if (ah_db_query(r->db, r->arena, &rows, SQL_LOGS_GET, "ss", r->params[1], a->id) != 0)
		return AH_EFAIL;
	if (rows.n == 0)
		return ah_reply_error(r, 404, "Invocation not found");
	size_t len = 0;
	const char *text = rows.v[0][1] ? ah_utf8_repair(r->arena, rows.v[0][1], rows.len[0][1], &len) : "";
	json_object *b = json_object_new_object();
	ah_json_str(b, "invocation_id", rows.v[0][0]);
	json_object_object_add(b, "logs", json_object_new_string_len(text, (int)len));
	ah_json_bool(b, "truncated", rows.v[0][2] && strcmp(rows.v[0][2], "1") == 0);
	return ah_reply_json(r, 200, b);
}

const ah_route ah_invocation_logs_routes[] = {
	{"GET", "/agents/{slug}/invocations/{id}/logs", get_logs, 0, 0, AH_AGENT_SCOPE},
	{NULL, NULL, NULL, 0, 0},
};
