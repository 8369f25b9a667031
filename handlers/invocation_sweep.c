/* Calls whose owner is gone (issue 28): a row of invocations_running whose
 * lock agenthost_inv_<id> nobody holds. Its owner (an asynchronous call's
 * process, a streamed call's worker) takes the lock before it makes the row
 * and releases it only after the call is recorded and the row removed, so a
 * row without a holder is a call whose owner was killed: an API restart or a
 * crash. Nobody else will record it.
 *
 * ah_running_settle records such a call failed (cancelled if that was asked)
 * with the reason, priced for its prompt like any failure, in the history, so
 * the listing, the usage (the history row's trigger) and GET agree; its
 * webhook (the call's, else its agent's, kept in the row) gets that record. It takes
 * the lock itself first: the lock free means the owner is gone, and held by
 * the settler it keeps a second settler (another API host's sweep, a GET)
 * out, so the call is recorded once. A call the owner recorded just before it
 * died only loses its row. On Galera a node sees only its own clients' locks:
 * there an unheld lock means a lost owner only once the longest call (600 s)
 * and its slack are over, and the history's primary key keeps a repeat out.
 *
 * ah_running_sweep settles every such row, from the API master's background
 * process every running_sweep_ms (schedule_run.c): a call nobody reads does
 * not stay "running". */
#include "invocations.h"
#include "running.h"
#include "webhooks.h"
#include "core/log.h"
#include "core/util.h"

#include <string.h>

#define SWEEP_BATCH 100

static const char SQL_LOST[] =
	"SELECT r.id FROM invocations_running r WHERE NOT " AH_RUNNING_OWNER_MAY_LIVE("r.") " LIMIT ?";
static const char SQL_ROW[] =
	"SELECT r.id, r.session_id, r.prompt, r.input_tokens, r.created_at, r.cancel_requested,"
	" TIMESTAMPDIFF(MICROSECOND, r.created_at, NOW(3)) DIV 1000, r.agent_id, a.user_id,"
	" EXISTS (SELECT 1 FROM invocations i WHERE i.id = r.id), r.webhook_url"
	" FROM invocations_running r JOIN agents a ON a.id = r.agent_id"
	" WHERE r.id = ? AND NOT " AH_RUNNING_GALERA_YOUNG("r.");
enum { S_ID, S_SESSION, S_PROMPT, S_IN, S_CREATED, S_CANCEL, S_AGE, S_AGENT, S_USER, S_RECORDED,
       S_HOOK };
static const char SQL_DEL[] = "DELETE FROM invocations_running WHERE id = ?";

static const char LOST_ERROR[] =
	"the call was lost: the API process running it ended before the runner answered"
	" (an API restart or crash); its output is unknown";

/* The history record of the lost call of row v (its owner's user as the
 * request's, whoever settles it). */
static void record_lost(ah_req *r, const ah_rows *rows)
{
	char **v = rows->v[0];
	bool cancel = v[S_CANCEL] && strcmp(v[S_CANCEL], "1") == 0;
	ah_invocation inv = {
		.id = v[S_ID], .session_id = v[S_SESSION], .created_at = v[S_CREATED],
		.prompt = v[S_PROMPT], .prompt_len = rows->len[0][S_PROMPT],
		.input_tokens = ah_cell_ll(v[S_IN]), .duration_ms = ah_cell_ll(v[S_AGE]),
		.status = cancel ? AH_INV_CANCELLED : AH_INV_FAILED, .error = LOST_ERROR,
	};
	ah_user owner = {.id = v[S_USER]}, *was = r->user;
	ah_log_warn("inv=%s: its owner is gone; recorded as %s", inv.id,
	            ah_invocation_status_names[inv.status]);
	r->user = &owner;
	ah_invocation_account(r, &inv);
	ah_invocation_record(r, v[S_AGENT], &inv, NULL, 0);
	if (v[S_HOOK]) { /* delivered as every finished call's record is */
		json_object *rec = ah_invocation_json(r, &inv, false);
		json_object_object_add(rec, "files", json_object_new_array());
		ah_webhook_queue(r, v[S_AGENT], inv.id, v[S_HOOK], rec);
		json_object_put(rec);
	}
	r->user = was;
}

int ah_running_settle(ah_req *r, const char *id)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, AH_RUNNING_SQL_LOCK, "s", id) != 0)
		return AH_EFAIL;
	if (rows.n != 1 || !rows.v[0][0] || strcmp(rows.v[0][0], "1") != 0)
		return 1; /* its owner (or another settler) holds it */
	int rc = ah_db_query(r->db, r->arena, &rows, SQL_ROW, "s", id);
	if (rc == 0 && rows.n == 1) {
		if (strcmp(rows.v[0][S_RECORDED], "1") != 0)
			record_lost(r, &rows);
		rc = ah_db_exec(r->db, NULL, SQL_DEL, "s", id);
	}
	ah_rows un;
	if (ah_db_query(r->db, r->arena, &un, AH_RUNNING_SQL_UNLOCK, "s", id) != 0)
		ah_log_warn("inv=%s: its lock not released: %s", id, ah_db_error(r->db));
	return rc;
}

int ah_running_sweep(ah_req *r)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, SQL_LOST, "i", (long long)SWEEP_BATCH) != 0) {
		ah_log_error("the sweep of lost calls failed: %s", ah_db_error(r->db));
		return AH_EFAIL;
	}
	for (size_t i = 0; i < rows.n; i++)
		if (ah_running_settle(r, rows.v[i][0]) < 0)
			ah_log_error("inv=%s: not settled: %s", rows.v[i][0], ah_db_error(r->db));
	return 0;
}
