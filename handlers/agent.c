/* The agent record: its column table, loading (from the authentication query
 * of scoped routes or a query of its own) and the contract's JSON. */
#include "agents.h"
#include "budgets.h"
#include "routes.h"
#include "auth/auth.h"
#include "db/enums.h"
#include "db/record.h"
#include "core/util.h"

#include <string.h>

/* The schema's ENUM order; a value the schema gains before this code does is
 * read as "error" (the agent cannot be invoked until the code knows it). */
const char *const ah_agent_status_names[] = {
	[AH_AGENT_DRAFT] = AH_AGENT_S_DRAFT, [AH_AGENT_DEPLOYING] = AH_AGENT_S_DEPLOYING,
	[AH_AGENT_ACTIVE] = AH_AGENT_S_ACTIVE, [AH_AGENT_ERROR] = AH_AGENT_S_ERROR,
	[AH_AGENT_STOPPED] = AH_AGENT_S_STOPPED, [AH_AGENT_STOPPED + 1] = NULL};
const char *const ah_source_type_names[] = {[AH_SOURCE_GIT] = AH_SOURCE_S_GIT, [AH_SOURCE_LOCAL] = AH_SOURCE_S_LOCAL,
                                            [AH_SOURCE_LOCAL + 1] = NULL};

_Static_assert(sizeof(ah_agent_status) == sizeof(int), "AH_COL_ENUM fields are ints");
_Static_assert(sizeof(ah_source_type) == sizeof(int), "AH_COL_ENUM fields are ints");

static const ah_col AGENT_COLUMNS[] = {
	AH_COL_S("a.id", ah_agent, id),
	AH_COL_S("a.name", ah_agent, name),
	AH_COL_S("a.slug", ah_agent, slug),
	AH_COL_S("a.description", ah_agent, description),
	AH_COL_E("a.source_type", ah_agent, source_type, ah_source_type_names, AH_SOURCE_GIT),
	AH_COL_S("a.git_repo_url", ah_agent, git_repo_url),
	AH_COL_S("a.git_branch", ah_agent, git_branch),
	AH_COL_I("a.timeout_seconds", ah_agent, timeout_seconds, AH_AGENT_TIMEOUT_DEFAULT),
	AH_COL_E("a.status", ah_agent, status, ah_agent_status_names, AH_AGENT_ERROR),
	AH_COL_S("a.status_message", ah_agent, status_message),
	AH_COL_S("a.sandbox_id", ah_agent, sandbox_id),
	AH_COL_B("a.needs_redeploy", ah_agent, needs_redeploy),
	AH_COL_S("a.created_at", ah_agent, created_at),
	AH_COL_S("a.updated_at", ah_agent, updated_at),
	AH_COL_S("a.deployed_at", ah_agent, deployed_at),
	AH_COL_S("a.image_path", ah_agent, image_path),
	AH_COL_S("a.entrypoint", ah_agent, entrypoint),
	AH_COL_S("a.runner_id", ah_agent, runner_id),
	AH_COL_S("a.code_sha256", ah_agent, code_sha256),
	AH_COL_I("a.min_warm", ah_agent, min_warm, 0),
	AH_COL_S("a.image_sha256", ah_agent, image_sha256),
	AH_COL_S("a.max_cost_usd_per_day", ah_agent, max_day),
	AH_COL_S("a.max_cost_usd_per_month", ah_agent, max_month),
	AH_COL_S("a.network", ah_agent, network),
	AH_COL_S("a.webhook_url", ah_agent, webhook_url),
};
#define AGENT_NCOLS (sizeof(AGENT_COLUMNS) / sizeof(AGENT_COLUMNS[0]))

static const char SQL_GET[] =
	"SELECT " AH_AGENT_COLS " FROM agents a WHERE a.user_id = ? AND a.slug = ?";
static const char SQL_GET_ID[] =
	"SELECT " AH_AGENT_COLS " FROM agents a WHERE a.id = ?";

static const char SQL_SCOPE[] =
	"SELECT " AH_AUTH_KEY_COLS ", " AH_AGENT_COLS " FROM " AH_AUTH_KEY_FROM
	" LEFT JOIN agents a ON a.user_id = u.id AND a.slug = ? WHERE k.key_id = ?";

const ah_scope ah_agent_scope = {SQL_SCOPE, AGENT_COLUMNS, AGENT_NCOLS, sizeof(ah_agent), 0};

/* list_counts' row of the agent's history (schema/019): ascii, hence the
 * CONVERT, which lets its primary key take the agent's id. */
static const char SQL_SCOPE_HISTORY[] =
	"SELECT " AH_AUTH_KEY_COLS ", " AH_AGENT_COLS ", c.n, c.changes FROM " AH_AUTH_KEY_FROM
	" LEFT JOIN agents a ON a.user_id = u.id AND a.slug = ?"
	" LEFT JOIN list_counts c ON c.kind = 'inv' AND c.owner_id = CONVERT(a.id USING ascii)"
	" WHERE k.key_id = ?";

const ah_scope ah_agent_history_scope = {SQL_SCOPE_HISTORY, AGENT_COLUMNS, AGENT_NCOLS,
                                         sizeof(ah_agent), 2};

/* What an invocation needs besides the agent, in the lookup that
 * authenticates it (issue 31: each was a round trip of its own): the user's
 * and the key's budgets (ah_budget_admit) and when the agent's runner last
 * beat (ah_runner_takeover); NULL without a runner row; and what an
 * ephemeral call's environment is made of (invoke.c's env_from_scope), so
 * that call makes no round trip of its own before the run. No NOW(): the
 * statement is then deterministic, and MariaDB's query cache answers it
 * until one of its rows changes (a runner's heartbeat, every
 * runner_heartbeat_seconds, is the usual change): a miss took ~0.4 ms more
 * than a hit. The age is worked out with this host's clock (invoke.c), as
 * the key's expiry is (lib/auth/auth.c). */
static const char SQL_SCOPE_INVOKE[] =
	"SELECT " AH_AUTH_KEY_COLS ", " AH_AGENT_COLS ", u.max_cost_usd_per_day, u.max_cost_usd_per_month,"
	" k.max_cost_usd_per_day, k.max_cost_usd_per_month, rn.heartbeat_at,"
	" u.quota_bytes - u.storage_used_bytes,"
	" (SELECT COUNT(*) FROM agent_files af WHERE af.agent_id = a.id),"
	" (SELECT COUNT(*) FROM secrets s WHERE s.agent_id = a.id),"
	" (SELECT JSON_ARRAYAGG(JSON_ARRAY(s.name, HEX(CONCAT(s.nonce, s.ciphertext))))"
	"  FROM secrets s WHERE s.agent_id = a.id) FROM " AH_AUTH_KEY_FROM
	" LEFT JOIN agents a ON a.user_id = u.id AND a.slug = ?"
	" LEFT JOIN runners rn ON rn.id = a.runner_id WHERE k.key_id = ?";

const ah_scope ah_agent_invoke_scope = {SQL_SCOPE_INVOKE, AGENT_COLUMNS, AGENT_NCOLS,
                                        sizeof(ah_agent), AH_AGENT_INVOKE_NEXTRA};

const ah_col *ah_agent_columns(size_t *n)
{
	*n = AGENT_NCOLS;
	return AGENT_COLUMNS;
}

static const ah_agent *parse(ah_req *r, char *const *row)
{
	ah_agent *a = ah_alloc(r->arena, sizeof(*a));
	ah_record_fill(a, AGENT_COLUMNS, AGENT_NCOLS, row);
	return a;
}

const ah_agent *ah_agent_from_rows(ah_req *r, const ah_rows *rows, size_t i)
{
	return parse(r, rows->v[i]);
}

int ah_agent_load(ah_req *r, const ah_agent **out)
{
	ah_rows rows;
	if (r->scope_loaded) {
		if (!r->scope)
			return ah_reply_error(r, 404, "Agent not found");
		*out = r->scope;
		return 0;
	}
	if (ah_db_query(r->db, r->arena, &rows, SQL_GET, "ss", r->user->id, r->params[0]) != 0)
		return AH_EFAIL;
	if (rows.n == 0)
		return ah_reply_error(r, 404, "Agent not found");
	*out = parse(r, rows.v[0]);
	return 0;
}

int ah_agent_by_id(ah_req *r, const char *id, const ah_agent **out)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, SQL_GET_ID, "s", id) != 0 || rows.n != 1)
		return AH_EFAIL;
	*out = parse(r, rows.v[0]);
	return 0;
}

/* A deploy waits for a runner to take its job. When none is alive (no
 * heartbeat within runner_stale_seconds, as /health counts), a deploying
 * agent's status_message says so: the CLI and the dashboard show it while
 * they follow the deploy, instead of waiting in silence. */
static const char *runner_wait_note(ah_req *r, const ah_agent *a)
{
	long long secs;
	if (a->status != AH_AGENT_DEPLOYING || a->status_message ||
	    ah_runner_heartbeat_age(r, &secs) != 0 ||
	    (secs >= 0 && secs <= ah_settings_of(r->cfg)->runner.stale_seconds))
		return a->status_message;
	if (secs < 0)
		return "Waiting for a runner: none has ever started (is agenthost-runner running?)";
	return ah_sprintf(r->arena, "Waiting for a runner: none is alive (the last heartbeat was %lld s "
	                  "ago; is agenthost-runner running?)", secs);
}

json_object *ah_agent_json(ah_req *r, const ah_agent *a)
{
	json_object *o = json_object_new_object();
	ah_json_str(o, "id", a->id);
	ah_json_str(o, "name", a->name);
	ah_json_str(o, "slug", a->slug);
	ah_json_str(o, "description", a->description);
	ah_json_str(o, "source_type", ah_source_type_names[a->source_type]);
	ah_json_str(o, "git_repo_url", a->git_repo_url);
	ah_json_str(o, "git_branch", a->git_branch);
	ah_json_int(o, "timeout_seconds", a->timeout_seconds);
	ah_json_int(o, "min_warm", a->min_warm);
	json_object_object_add(o, "network", ah_agent_network_json(a->network));
	ah_json_str(o, "webhook_url", a->webhook_url);
	ah_json_str(o, "status", ah_agent_status_names[a->status]);
	ah_json_str(o, "status_message", runner_wait_note(r, a));
	ah_json_str(o, "sandbox_id", a->sandbox_id);
	ah_json_bool(o, "needs_redeploy", a->needs_redeploy);
	ah_json_time(r, o, "created_at", a->created_at);
	ah_json_time(r, o, "updated_at", a->updated_at);
	ah_json_time(r, o, "deployed_at", a->deployed_at);
	ah_budget_json(r, o, a->max_day, a->max_month);
	return o;
}
