/* GET /agents/{slug}/invocations/{id} and POST …/{id}/cancel (issue 28): one
 * invocation, running or finished, and stopping one that runs. A call in
 * progress (asynchronous or streamed) has a row in invocations_running whose
 * owner holds its lock (running.h); a finished one is in the history. A
 * running row whose owner is gone (its process was killed) is settled here
 * (recorded failed with that reason, invocation_sweep.c) if the API master's
 * periodic sweep has not done so yet: no call reads "running" past its
 * owner. Cancel asks the agent's runner to stop the
 * run (SIGTERM, SIGKILL after AH_SANDBOX_CANCEL_GRACE_MS); the owner then
 * records it "cancelled", billed for its prompt and the output it wrote.
 * Another agent's or user's invocation is 404 like an unknown one. */
#include "agents.h"
#include "invocations.h"
#include "routes.h"
#include "running.h"
#include "runner_calls.h"
#include "core/log.h"
#include "core/util.h"

#include <string.h>
#include <unistd.h>

#define CANCEL_WAIT_MS 8000 /* the grace (5 s) and the recording; then 202 */

static const char SQL_FINISHED[] =
	"SELECT " AH_HISTORY_COLS " FROM invocations i WHERE i.agent_id = ? AND i.id = ?";
/* The owner column: its lock held (the call runs), or not (running.h). */
static const char SQL_RUNNING[] =
	"SELECT id, session_id, created_at, runner_id, cancel_requested, " AH_RUNNING_OWNER_MAY_LIVE("")
	" FROM invocations_running WHERE agent_id = ? AND id = ?";
static const char SQL_CANCEL_MARK[] = "UPDATE invocations_running SET cancel_requested = 1 WHERE id = ?";
enum { R_ID, R_SESSION, R_CREATED, R_RUNNER, R_CANCEL, R_OWNER };

enum { NONE, RUNNING, FINISHED };

static int finished(ah_req *r, const ah_agent *a, const char *id, json_object **out)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, SQL_FINISHED, "ss", a->id, id) != 0)
		return AH_EFAIL;
	if (rows.n != 1)
		return NONE;
	*out = ah_invocation_row_json(r, &rows, 0);
	return FINISHED;
}

static json_object *running_json(ah_req *r, char **v)
{
	json_object *o = json_object_new_object();
	ah_json_str(o, "invocation_id", v[R_ID]);
	ah_json_str(o, "session_id", v[R_SESSION]);
	ah_json_str(o, "status", "running");
	ah_json_bool(o, "cancel_requested", v[R_CANCEL] && strcmp(v[R_CANCEL], "1") == 0);
	ah_json_time(r, o, "created_at", v[R_CREATED]);
	return o;
}

/* NONE, RUNNING (*out the running view, *row kept) or FINISHED (*out the
 * history's record); a running row without an owner is settled first. */
static int lookup(ah_req *r, const ah_agent *a, const char *id, json_object **out, ah_rows *run)
{
	if (ah_db_query(r->db, r->arena, run, SQL_RUNNING, "ss", a->id, id) != 0)
		return AH_EFAIL;
	bool live = run->n == 1 && run->v[0][R_OWNER] && strcmp(run->v[0][R_OWNER], "1") == 0;
	int rc = run->n == 1 && !live ? ah_running_settle(r, id) : 0;
	if (rc < 0)
		return AH_EFAIL;
	if (live || rc == 1) { /* (1: another settler has it this instant) */
		*out = running_json(r, run->v[0]);
		return RUNNING;
	}
	return finished(r, a, id, out);
}

static int get_invocation(ah_req *r)
{
	const ah_agent *a;
	json_object *o = NULL;
	ah_rows run;
	int rc = ah_agent_load(r, &a);
	if (rc != 0)
		return rc;
	rc = lookup(r, a, r->params[1], &o, &run);
	if (rc < 0)
		return rc;
	if (rc == NONE)
		return ah_reply_error(r, 404, "Invocation not found");
	return ah_reply_json(r, 200, o);
}

/* The runner holding the run: the one the call went to. */
static void ask_runner(ah_req *r, const ah_agent *a, const char *id, const char *runner_id)
{
	json_object *q = ah_json_own(r, json_object_new_object()), *ans;
	ah_json_str(q, "op", "cancel");
	ah_json_str(q, "agent_id", a->id);
	if (runner_id && *runner_id)
		ah_json_str(q, "runner_id", runner_id);
	ah_json_str(q, "invocation_id", id);
	if (ah_runner_call(r, q, &ans, 5000) != 0)
		ah_log_warn("inv=%s: the runner did not take the cancel", id);
}

static const char *status_of(json_object *o)
{
	json_object *s = NULL;
	return json_object_object_get_ex(o, "status", &s) ? json_object_get_string(s) : "?";
}

static int cancel(ah_req *r)
{
	const ah_agent *a;
	json_object *o = NULL;
	ah_rows run;
	const char *id = r->params[1];
	int rc = ah_agent_load(r, &a);
	if (rc != 0 || (rc = lookup(r, a, id, &o, &run)) < 0)
		return rc;
	if (rc == NONE)
		return ah_reply_error(r, 404, "Invocation not found");
	if (rc == FINISHED) {
		ah_verr(r, "path", "id", ah_sprintf(r->arena, "Invocation already finished (status: %s): "
		        "only a running call can be cancelled", status_of(o)), "invocation_finished");
		json_object_put(o);
		return ah_verr_reply(r);
	}
	json_object_put(o);
	if (ah_db_exec(r->db, NULL, SQL_CANCEL_MARK, "s", id) != 0)
		return AH_EFAIL;
	ask_runner(r, a, id, run.v[0][R_RUNNER]);
	/* Most programs end on SIGTERM at once: the answer is then the record. */
	for (int64_t until = ah_now_ms() + CANCEL_WAIT_MS; ah_now_ms() < until;) {
		usleep(100 * 1000);
		if ((rc = lookup(r, a, id, &o, &run)) < 0)
			return rc;
		if (rc != RUNNING)
			break;
		json_object_put(o);
		o = NULL;
	}
	if (rc == FINISHED)
		return ah_reply_json(r, 200, o);
	if (rc == RUNNING)
		return ah_reply_json(r, 202, o);
	return ah_reply_error(r, 404, "Invocation not found");
}

const ah_route ah_invocation_routes[] = {
	{"GET", "/agents/{slug}/invocations/{id}", get_invocation, 0, 0, AH_AGENT_SCOPE},
	{"POST", "/agents/{slug}/invocations/{id}/cancel", cancel, 0, 0, AH_AGENT_SCOPE},
	{NULL, NULL, NULL, 0, 0},
};
