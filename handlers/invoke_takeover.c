/* An agent whose runner is gone (its heartbeat in `runners` older than three
 * periods: killed, crashed, its machine lost) is taken over by a live runner
 * on its next invocation: this host's own if it is alive, else any. The move
 * is a conditional UPDATE of agents.runner_id from the dead runner's id, so of
 * several API hosts deciding at once one moves it and the others follow that
 * move. Sessions are sandboxes on the dead runner: they end with it, as if
 * they had expired, and the next call with their id starts anew. The new
 * runner fetches the image from the file store (lib/runner/images.c), so an
 * agent whose image was not kept there stays where it is.
 *
 * This is the cluster's policy, not the protocol's: it reads the runners'
 * heartbeats and writes agent and session rows, as the API's handlers do, so
 * it lives with them (it was in lib/runner_client, which made the runner
 * binary, linking that module for the protocol, link the HTTP layer too). */
#include "runner_calls.h"
#include "core/log.h"
#include "core/util.h"
#include "core/settings.h"
#include "db/db.h"
#include "db/enums.h"

#include <stdio.h>
#include <string.h>

/* The runner this worker last found alive, and when: an invocation does not
 * ask the database again within one heartbeat period. A runner is "gone"
 * only after three missed heartbeats (15 s by default), so a period (5 s)
 * delays a takeover by no more than that, and spares calls a round trip
 * (issue 31: at one second, calls a second apart each paid it). Workers are
 * single threaded. */
static struct {
	char id[80];
	int64_t at;
} seen_alive;

static bool known_alive(const char *runner_id, int64_t for_ms)
{
	return strcmp(seen_alive.id, runner_id) == 0 && ah_now_ms() - seen_alive.at < for_ms;
}

static void note_alive(const char *runner_id)
{
	snprintf(seen_alive.id, sizeof seen_alive.id, "%s", runner_id);
	seen_alive.at = ah_now_ms();
}

static const char SQL_DEAD[] =
	"SELECT heartbeat_at < NOW(3) - INTERVAL ? SECOND FROM runners WHERE id = ?";
static const char SQL_LIVE[] =
	"SELECT id FROM runners WHERE heartbeat_at >= NOW(3) - INTERVAL ? SECOND "
	"ORDER BY id = ? DESC, heartbeat_at DESC LIMIT 1";
static const char SQL_MOVE[] =
	"UPDATE agents SET runner_id = ?, updated_at = NOW(3) "
	"WHERE id = ? AND runner_id = ?";
static const char SQL_END_SESSIONS[] =
	"UPDATE sessions SET state = " AH_SQ(AH_SESSION_S_ENDED) ", sandbox_id = NULL "
	"WHERE agent_id = ? AND state = " AH_SQ(AH_SESSION_S_ACTIVE);
static const char SQL_NOW[] = "SELECT runner_id FROM agents WHERE id = ?";

const char *ah_runner_takeover(ah_req *r, const char *agent_id, const char *runner_id,
                               bool movable, long long age_ms)
{
	long long period = ah_settings_of(r->cfg)->runner.heartbeat_seconds, grace = 3 * period;
	char local[80] = "";
	ah_rows rows;
	unsigned long long n = 0;
	/* Read with the request: alive without a question of its own (issue 31). */
	if (runner_id && age_ms >= 0 && age_ms < grace * 1000)
		return runner_id;
	if (!runner_id || !movable || !r->db || known_alive(runner_id, period * 1000) ||
	    ah_db_query(r->db, r->arena, &rows, SQL_DEAD, "is", grace, runner_id) != 0)
		return runner_id; /* alive (or unknown: the call says what is wrong) */
	if (rows.n == 1 && strcmp(ah_cell(&rows, 0, 0), "0") == 0) {
		note_alive(runner_id);
		return runner_id;
	}
	ah_runner_local_id(r->cfg, local, sizeof local);
	if (ah_db_query(r->db, r->arena, &rows, SQL_LIVE, "is", grace, local) != 0 || rows.n == 0)
		return runner_id; /* no runner alive: nothing to move to */
	const char *to = rows.v[0][0];
	if (ah_db_exec(r->db, &n, SQL_MOVE, "sss", to, agent_id, runner_id) != 0)
		return runner_id;
	if (n == 1) {
		ah_log_warn("agent=%s: runner %s is gone; runner %s takes the agent over", agent_id,
		            runner_id, to);
		if (ah_db_exec(r->db, NULL, SQL_END_SESSIONS, "s", agent_id) != 0)
			ah_log_warn("agent=%s: could not end the sessions on runner %s", agent_id, runner_id);
		return to;
	}
	/* Another API host moved it first: wherever it went. */
	if (ah_db_query(r->db, r->arena, &rows, SQL_NOW, "s", agent_id) != 0 || rows.n != 1 ||
	    !rows.v[0][0])
		return runner_id;
	return rows.v[0][0];
}
