/* A call's session (invoke.c): the session row made to exist and be active
 * before the run, under the plan's cap of live sessions. */
#include "invoke.h"
#include "runner_calls.h"
#include "core/log.h"
#include "core/plans.h"
#include "core/util.h"
#include "db/enums.h"

#include <string.h>

static const char SQL_SESSION_LOCK[] =
	"SELECT state FROM sessions WHERE agent_id = ? AND id = ? FOR UPDATE";
static const char SQL_SESSION_CREATE[] =
	"INSERT IGNORE INTO sessions (agent_id, id, state, created_at) VALUES (?, ?, " AH_SQ(AH_SESSION_S_ACTIVE) ", NOW(3))";
/* The session cap: the user's row serialises every call that would start a
 * session, so two of them at the cap minus one cannot both pass the count.
 * Live: active and used within session_idle_seconds (an active row older than
 * that has lost its sandbox to the idle reclaim or to a runner restart). The
 * session being claimed does not count itself. The second column is how many
 * seconds until the least recently used live session may be reclaimed. */
static const char SQL_USER_LOCK[] = "SELECT plan FROM users WHERE id = ? FOR UPDATE";
static const char SQL_SESSIONS_LIVE[] =
	"SELECT COUNT(*), GREATEST(1, TIMESTAMPDIFF(SECOND, NOW(3),"
	" MIN(COALESCE(c.last_invoked_at, s.created_at)) + INTERVAL ? SECOND) + 1)"
	" FROM sessions s JOIN agents a ON a.id = s.agent_id"
	" LEFT JOIN session_calls c ON c.agent_id = s.agent_id AND c.id = s.id"
	" WHERE a.user_id = ? AND s.state = " AH_SQ(AH_SESSION_S_ACTIVE) " AND NOT (s.agent_id = ? AND s.id = ?)"
	" AND COALESCE(c.last_invoked_at, s.created_at) > NOW(3) - INTERVAL ? SECOND";
/* A session that starts anew counts its calls from 0 (schema/033: the
 * counts live in session_calls, out of the row the call's lookup reads). */
static const char SQL_SESSION_RESTART[] =
	"UPDATE sessions SET state = " AH_SQ(AH_SESSION_S_ACTIVE) ", sandbox_id = NULL, created_at = NOW(3)"
	" WHERE agent_id = ? AND id = ?";
static const char SQL_SESSION_RECOUNT[] = "DELETE FROM session_calls WHERE agent_id = ? AND id = ?";

/* Asks the runner to drop whatever sandbox a session had. */
static int forget_sandbox(ah_req *r, const char *agent_id, const char *sid)
{
	json_object *req = ah_json_own(r, json_object_new_object()), *resp, *ok;
	ah_json_str(req, "op", "destroy_session");
	ah_json_str(req, "agent_id", agent_id);
	ah_json_str(req, "session", sid);
	if (ah_runner_call(r, req, &resp, 30000) != 0 ||
	    !json_object_object_get_ex(resp, "ok", &ok) || !json_object_get_boolean(ok))
		return AH_EFAIL;
	return 0;
}

/* The 429 of a call that would start a session past the plan's cap. */
static int session_limit_reply(ah_req *r, const char *plan, long long cap, const char *retry)
{
	json_object *b = json_object_new_object();
	ah_json_str(b, "detail", ah_sprintf(r->arena,
	            "Session limit reached: the %s plan allows %lld concurrent sessions. End one"
	            " (DELETE /agents/{slug}/sessions/{id}) or let an idle one expire, or call"
	            " without session_id.", plan, cap));
	ah_json_str(b, "code", "session_limit");
	ah_header(r, "Retry-After", retry);
	return ah_reply_json(r, 429, b);
}

/* Within claim_session's transaction: 0 when the user may start one more
 * session; else the 429 is answered (AH_EDONE). */
static int check_session_cap(ah_req *r, const char *agent_id, const char *sid)
{
	ah_rows u, n;
	const ah_settings *set = ah_settings_of(r->cfg);
	long long idle = set->runner.session_idle_seconds, cap, live;
	if (ah_db_query(r->db, r->arena, &u, SQL_USER_LOCK, "s", r->user->id) != 0 || u.n != 1)
		return AH_EFAIL;
	const char *plan = u.v[0][0];
	/* A plan the table does not know gets the free plan's cap. */
	const ah_plan *p = ah_plan_find(plan);
	cap = set->invoke.max_sessions[p ? ah_plan_id_of(p) : AH_PLAN_FREE];
	/* Counted after the lock: the transaction's snapshot starts with this
	 * read, so it sees every session a call that held the lock before made. */
	if (ah_db_query(r->db, r->arena, &n, SQL_SESSIONS_LIVE, "isssi", idle, r->user->id, agent_id,
	                sid, idle) != 0 || n.n != 1 || ah_parse_ll(&live, n.v[0][0]) != 0)
		return AH_EFAIL;
	if (live < cap)
		return 0;
	ah_db_rollback(r->db);
	return session_limit_reply(r, plan, cap, n.v[0][1] ? n.v[0][1] : "1") == 0 ? AH_EDONE : AH_EFAIL;
}

/* Makes the session row exist and be active. A session that ended (stop,
 * redeploy) or expired (idle reclaim) starts anew with a fresh sandbox. Either
 * way a session starts, so the plan's cap of live sessions applies (a call in
 * a session that is active never waits for it). The row lock makes a
 * concurrent call of the same session wait until the old sandbox is gone, so
 * it never runs in a sandbox that is being destroyed. state: what build_env
 * read (NULL: no such session yet). 0, AH_EDONE (429 answered) or AH_EFAIL. */
static int claim_session_once(ah_req *r, const char *agent_id, const char *sid)
{
	ah_rows rows;
	if (ah_db_begin(r->db) != 0)
		return AH_EFAIL;
	int rc = check_session_cap(r, agent_id, sid);
	if (rc == AH_EDONE)
		return rc; /* rolled back */
	if (rc == 0)
		rc = ah_db_exec(r->db, NULL, SQL_SESSION_CREATE, "ss", agent_id, sid);
	if (rc == 0)
		rc = ah_db_query(r->db, r->arena, &rows, SQL_SESSION_LOCK, "ss", agent_id, sid);
	if (rc == 0 && rows.n == 1 && strcmp(rows.v[0][0], "active") != 0) {
		if (forget_sandbox(r, agent_id, sid) != 0)
			ah_log_warn("agent=%s session=%s: runner did not confirm the old sandbox is gone",
			            agent_id, sid);
		rc = ah_db_exec(r->db, NULL, SQL_SESSION_RESTART, "ss", agent_id, sid);
		if (rc == 0)
			rc = ah_db_exec(r->db, NULL, SQL_SESSION_RECOUNT, "ss", agent_id, sid);
	}
	if (rc == 0 && (rc = ah_db_commit(r->db)) == 0)
		return 0;
	ah_db_rollback(r->db);
	return AH_EFAIL;
}

/* Two first calls of one session meet on the same rows: InnoDB may pick one
 * as a deadlock's victim and roll it back, and running it again then finds
 * the session the other made. */
int ah_invoke_claim_session(ah_req *r, const char *agent_id, const char *sid, const char *state)
{
	if (state && strcmp(state, "active") == 0)
		return 0; /* the common case: no transaction, no lock */
	int rc = AH_EFAIL;
	for (int tries = 0; tries < 3; tries++) {
		rc = claim_session_once(r, agent_id, sid);
		if (rc != AH_EFAIL || !ah_db_deadlocked(r->db))
			break;
		ah_log_warn("agent=%s session=%s: deadlock claiming the session; again", agent_id, sid);
	}
	return rc;
}
