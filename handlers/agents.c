/* /agents: register, list, read, change and delete agents, plus the lifecycle
 * endpoints that only queue work (deploy) or ask the runner (sandbox stop).
 * Deploys themselves happen in agenthost-runner. */
#include "agents.h"
#include "budgets.h"
#include "files_api.h"
#include "core/log.h"
#include "auth/auth.h"
#include "list.h"
#include "routes.h"
#include "runner_calls.h"
#include "code.h"
#include "slug.h"
#include "core/plans.h"
#include "core/util.h"
#include "validate.h"
#include "webhooks.h"
#include "db/enums.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Newest first; offset pages as a deferred join (ids from the index, then
 * the page's rows), cursor pages right after the cursor's (created_at, id). */
#define LIST_ORDER " ORDER BY a.created_at DESC, a.id DESC"
static const char SQL_LIST[] =
	"SELECT " AH_AGENT_COLS " FROM (SELECT id FROM agents WHERE user_id = ?"
	" ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?) k JOIN agents a ON a.id = k.id" LIST_ORDER;
static const char SQL_LIST_REV[] =
	"SELECT " AH_AGENT_COLS " FROM (SELECT id FROM agents WHERE user_id = ?"
	" ORDER BY created_at, id LIMIT ? OFFSET ?) k JOIN agents a ON a.id = k.id" LIST_ORDER;
enum { COL_ID = 0, COL_CREATED = 12 }; /* in AH_AGENT_COLS */
static const char SQL_LIST_AFTER[] =
	"SELECT " AH_AGENT_COLS " FROM agents a FORCE INDEX (agents_user_created) WHERE a.user_id = ?"
	" AND a.created_at <= ? AND (a.created_at < ? OR a.id < ?)" LIST_ORDER " LIMIT ?";
static const char SQL_SLUG_TAKEN[] = "SELECT 1 FROM agents WHERE user_id = ? AND slug = ?";
static const char SQL_INSERT[] =
	"INSERT INTO agents (id, user_id, name, slug, description, source_type, git_repo_url,"
	" git_branch, timeout_seconds, min_warm, network, webhook_url, status, needs_redeploy, created_at,"
	" updated_at, max_cost_usd_per_day, max_cost_usd_per_month)"
	" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, " AH_SQ(AH_AGENT_S_DRAFT) ", 0, NOW(3), NOW(3), ?, ?)";
static const char SQL_UPDATE[] =
	"UPDATE agents SET name = ?, slug = ?, description = ?, source_type = ?, git_repo_url = ?,"
	" git_branch = ?, timeout_seconds = ?, min_warm = ?, network = ?, webhook_url = ?,"
	" needs_redeploy = ?, updated_at = NOW(3), max_cost_usd_per_day = ?, max_cost_usd_per_month = ?"
	" WHERE id = ?";
/* What the row held when it went: a deploy or an upload that changed them
 * after this request read the agent released the older ones itself. */
static const char SQL_DELETE[] = "DELETE FROM agents WHERE id = ? RETURNING code_sha256, image_sha256";
static const char SQL_START_DEPLOY[] =
	"UPDATE agents SET status = " AH_SQ(AH_AGENT_S_DEPLOYING) ", status_message = NULL, updated_at = NOW(3)"
	" WHERE id = ? AND status <> " AH_SQ(AH_AGENT_S_DEPLOYING);
static const char SQL_SUPERSEDE_JOBS[] =
	"UPDATE deploy_jobs SET state = " AH_SQ(AH_JOB_S_FAILED) ", error = 'superseded', updated_at = NOW(3)"
	" WHERE agent_id = ? AND state = " AH_SQ(AH_JOB_S_QUEUED);
static const char SQL_ENQUEUE[] =
	"INSERT INTO deploy_jobs (agent_id, state, created_at, updated_at)"
	" VALUES (?, " AH_SQ(AH_JOB_S_QUEUED) ", NOW(3), NOW(3))";
/* The deploy's record (handlers/deploys.c), in the enqueue's transaction:
 * the source as it stands now and who asked. */
static const char SQL_RECORD_DEPLOY[] =
	"INSERT INTO deploys (id, agent_id, job_id, source_type, git_repo_url, git_branch, code_sha256,"
	" user_id, api_key_id, api_key_name, created_at) SELECT ?, id, LAST_INSERT_ID(), source_type,"
	" IF(source_type = " AH_SQ(AH_SOURCE_S_GIT) ", git_repo_url, NULL),"
	" IF(source_type = " AH_SQ(AH_SOURCE_S_GIT) ", git_branch, NULL),"
	" IF(source_type = " AH_SQ(AH_SOURCE_S_LOCAL) ", code_sha256, NULL), ?, ?, (SELECT name FROM api_keys WHERE id = ?),"
	" NOW(3) FROM agents WHERE id = ?";
/* Images the agent's deploy records still hold in the file store. */
static const char SQL_KEPT_IMAGES[] =
	"SELECT image_sha256 FROM deploys WHERE agent_id = ? AND image_kept = 1";
static const char SQL_STOP[] =
	"UPDATE agents SET status = " AH_SQ(AH_AGENT_S_STOPPED) ", sandbox_id = NULL, updated_at = NOW(3) WHERE id = ?";
static const char SQL_END_SESSIONS[] =
	"UPDATE sessions SET state = " AH_SQ(AH_SESSION_S_ENDED) ", sandbox_id = NULL WHERE agent_id = ? AND state = " AH_SQ(AH_SESSION_S_ACTIVE);

static int reply_agent_by_id(ah_req *r, int status, const char *id)
{
	const ah_agent *a;
	return ah_agent_by_id(r, id, &a) ? AH_EFAIL : ah_reply_json(r, status, ah_agent_json(r, a));
}

/* ---- input ---- */

long long ah_agent_warm_cap(ah_req *r)
{
	/* A plan the table does not know gets the free plan's cap. */
	const ah_plan *p = ah_plan_find(r->user->plan);
	long long plan = (p ? p : &ah_plans[AH_PLAN_FREE])->warm;
	long long host = ah_settings_of(r->cfg)->runner.warm_max;
	return plan < host ? plan : host;
}

typedef struct agent_in {
	const char *name, *slug, *description, *source_type, *git_repo_url, *git_branch, *network;
	const char *webhook_url;
	long long timeout, min_warm;
	bool has_name, has_slug, has_description, has_source_type, has_repo, has_branch, has_timeout,
	     has_min_warm, has_network, has_webhook_url;
	ah_budget_in budget;
} agent_in;

static const char *const AGENT_FIELDS[] = {"name", "slug", "description", "source_type",
                                           "git_repo_url", "git_branch", "timeout_seconds", "min_warm",
                                           "network", "webhook_url", AH_BUDGET_FIELDS, NULL};

static void check_agent_fields(ah_req *r, json_object *o, agent_in *in, bool create)
{
	ah_field_str(r, o, "name", create ? AH_F_REQUIRED : 0, 1, 255, &in->name, &in->has_name);
	if (ah_field_str(r, o, "slug", create ? AH_F_NULLABLE : 0, 1, 63, &in->slug, &in->has_slug) == 0 &&
	    in->slug && !ah_slug_valid(in->slug))
		ah_verr(r, "body", "slug", "String should match pattern '^[a-z0-9]+(-[a-z0-9]+)*$'",
		        "string_pattern_mismatch");
	ah_field_str(r, o, "description", AH_F_NULLABLE, 0, 10000, &in->description, &in->has_description);
	if (ah_field_str(r, o, "source_type", 0, 0, 16, &in->source_type, &in->has_source_type) == 0 &&
	    in->source_type && strcmp(in->source_type, "git") != 0 && strcmp(in->source_type, "local") != 0)
		ah_verr(r, "body", "source_type", "Input should be 'git' or 'local'", "enum");
	if (ah_field_str(r, o, "git_repo_url", AH_F_NULLABLE, 1, 2048, &in->git_repo_url, &in->has_repo) == 0 &&
	    in->git_repo_url && !ah_repo_url_valid(in->git_repo_url))
		ah_verr(r, "body", "git_repo_url",
		        "Input should be a git URL (https://, ssh://, git:// or user@host:path)", "url_parsing");
	if (ah_field_str(r, o, "git_branch", AH_F_NULLABLE, 1, 255, &in->git_branch, &in->has_branch) == 0 &&
	    in->git_branch && !ah_branch_valid(in->git_branch))
		ah_verr(r, "body", "git_branch", "Input should be a valid branch or tag name", "value_error");
	ah_field_int(r, o, "timeout_seconds", 0, 1, 600, &in->timeout, &in->has_timeout);
	ah_field_int(r, o, "min_warm", 0, 0, ah_agent_warm_cap(r), &in->min_warm, &in->has_min_warm);
	ah_budget_fields(r, o, &in->budget);
	ah_agent_network_field(r, o, &in->network, &in->has_network);
	ah_webhook_url_field(r, o, &in->webhook_url, &in->has_webhook_url);
}

/* ---- handlers ---- */

static json_object *agent_row_json(ah_req *r, const ah_rows *rows, size_t i)
{
	return ah_agent_json(r, ah_agent_from_rows(r, rows, i));
}

static int list_agents(ah_req *r)
{
	static const ah_list list = {.page_sql = SQL_LIST, .after_sql = SQL_LIST_AFTER, .rev_sql = SQL_LIST_REV,
	                             .count_kind = "agt", .time_col = COL_CREATED, .id_col = COL_ID,
	                             .to_json = agent_row_json};
	return ah_list_keyset(r, &list, r->user->id, NULL, 0);
}

static int create_agent(ah_req *r)
{
	json_object *o;
	agent_in in = {.timeout = AH_AGENT_TIMEOUT_DEFAULT};
	if (ah_body_object(r, &o, AGENT_FIELDS) != 0)
		return AH_EDONE;
	check_agent_fields(r, o, &in, true);
	const char *type = in.source_type ? in.source_type : "git";
	if (strcmp(type, "git") == 0 && !in.git_repo_url && !r->errors)
		ah_verr(r, "body", "git_repo_url", "Field required", "missing");
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	const char *slug = in.slug;
	const char *id = ah_id_new(r->arena, "agt");
	int rc = AH_ECONFLICT;
	/* A derived slug can be taken between the check and the insert by a concurrent
	 * create: derive again rather than answer 409 for a slug the client never chose. */
	for (int attempt = 0; rc == AH_ECONFLICT && attempt < (in.slug ? 1 : 5); attempt++) {
		if (!in.slug && ah_slug_free(r, SQL_SLUG_TAKEN, in.name, "agent", &slug) != 0)
			return AH_EFAIL;
		rc = ah_db_exec(r->db, NULL, SQL_INSERT, "ssssssssiissss", id, r->user->id, in.name, slug,
		                in.description, type, in.git_repo_url, in.git_branch, in.timeout,
		                in.min_warm, in.network, in.webhook_url, in.budget.day, in.budget.month);
	}
	if (rc == AH_ECONFLICT)
		return ah_reply_error(r, 409, ah_sprintf(r->arena, "Slug '%s' is already taken", slug));
	if (rc != 0)
		return rc;
	return reply_agent_by_id(r, 201, id);
}

static int get_agent(ah_req *r)
{
	const ah_agent *a;
	int rc = ah_agent_load(r, &a);
	return rc ? rc : ah_reply_json(r, 200, ah_agent_json(r, a));
}

static bool str_changed(const char *old, const char *now)
{
	return (old == NULL) != (now == NULL) || (old && strcmp(old, now) != 0);
}

static int patch_agent(ah_req *r)
{
	const ah_agent *a;
	json_object *o;
	agent_in in = {0};
	int rc = ah_agent_load(r, &a);
	if (rc != 0 || (rc = ah_body_object(r, &o, AGENT_FIELDS)) != 0)
		return rc;
	check_agent_fields(r, o, &in, false);
	/* A field that failed validation is present but NULL: never read it below. */
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	const char *old_type = ah_source_type_names[a->source_type];
	const char *type = in.has_source_type ? in.source_type : old_type;
	const char *repo = in.has_repo ? in.git_repo_url : a->git_repo_url;
	const char *branch = in.has_branch ? in.git_branch : a->git_branch;
	if (strcmp(type, "git") == 0 && !repo)
		ah_verr(r, "body", "git_repo_url", "Field required for git agents", "missing");
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	/* Source settings only take effect with the next deploy. */
	bool redeploy = a->needs_redeploy ||
	                (a->deployed_at && (strcmp(type, old_type) != 0 ||
	                 str_changed(a->git_repo_url, repo) || str_changed(a->git_branch, branch)));
	const char *network = in.has_network ? in.network : a->network;
	rc = ah_db_exec(r->db, NULL, SQL_UPDATE, "ssssssiississs",
	                in.has_name ? in.name : a->name, in.has_slug ? in.slug : a->slug,
	                in.has_description ? in.description : a->description, type, repo, branch,
	                in.has_timeout ? in.timeout : a->timeout_seconds,
	                in.has_min_warm ? in.min_warm : a->min_warm, network,
	                in.has_webhook_url ? in.webhook_url : a->webhook_url, (long long)redeploy,
	                in.budget.has_day ? in.budget.day : a->max_day,
	                in.budget.has_month ? in.budget.month : a->max_month, a->id);
	if (rc == AH_ECONFLICT)
		return ah_reply_error(r, 409, ah_sprintf(r->arena, "Slug '%s' is already taken", in.slug));
	/* Fewer (or no) warm processes: the runner drops the extra ones now rather
	 * than at the agent's next call (a timeout_seconds change needs nothing:
	 * the deadline is the call's). A new network setting: warm processes
	 * started under the old rules go too (the runner also drops every
	 * sandbox of the agent made under other rules at its next call). */
	if (rc == 0 && ((in.has_min_warm && in.min_warm != a->min_warm) || str_changed(a->network, network)))
		ah_runner_retire_warm(r, a->id, a->runner_id);
	return rc ? rc : reply_agent_by_id(r, 200, a->id);
}

static int delete_agent(ah_req *r)
{
	const ah_agent *a;
	int rc = ah_agent_load(r, &a);
	if (rc != 0)
		return rc;
	ah_rows gone, kept;
	if (ah_db_query(r->db, r->arena, &kept, SQL_KEPT_IMAGES, "s", a->id) != 0 ||
	    ah_db_query(r->db, r->arena, &gone, SQL_DELETE, "s", a->id) != 0)
		return AH_EFAIL;
	/* The row first, so that nothing starts a new sandbox of it; then its
	 * runner (named: the row no longer leads to it) drops its sandboxes and
	 * its images at once. An unreachable runner's periodic sweep does it. */
	if (a->runner_id && *a->runner_id)
		ah_runner_forget_agent(r, a->id, a->runner_id, true);
	ah_code_remove(r, a->id);
	if (gone.n == 1) { /* not a delete of the same agent at the same moment */
		ah_code_release(r, ah_cell(&gone, 0, 0));
		/* Each kept image's reference is its deploy record's; the agent's own
		 * image only holds one of its own when no record does (deployed
		 * before deploys were recorded). */
		bool recorded = false;
		for (size_t i = 0; i < kept.n; i++) {
			ah_code_release(r, ah_cell(&kept, i, 0));
			recorded |= ah_cell(&gone, 0, 1) && strcmp(ah_cell(&kept, i, 0), ah_cell(&gone, 0, 1)) == 0;
		}
		if (!recorded)
			ah_code_release(r, ah_cell(&gone, 0, 1));
	}
	/* Its agent and session files, bytes and quota with them (attachments of
	 * the user's own files went with the row). */
	ah_err err;
	if (ah_files_delete_for_agent(r->db, ah_files_store(), r->arena, a->id, &err) != 0)
		ah_log_error("files of deleted agent %s: %s", a->id, err.msg);
	/* Its history's prompts and responses kept in the file store (the rows
	 * went by cascade); what one call leaves, the runner's sweep takes. */
	int released;
	if (ah_history_blobs_sweep(r->db, ah_files_store(), r->arena, a->id, 100, 10, &released, &err) != 0)
		ah_log_error("history blobs of deleted agent %s: %s", a->id, err.msg);
	return ah_reply_no_content(r);
}

/* The deploy's transaction: 0, AH_ECONFLICT (a deploy is running) or AH_EFAIL. */
static int start_deploy(ah_req *r, const ah_agent *a)
{
	unsigned long long changed = 0;
	if (ah_db_begin(r->db) != 0)
		return AH_EFAIL;
	if (ah_db_exec(r->db, &changed, SQL_START_DEPLOY, "s", a->id) != 0)
		goto fail;
	if (changed == 0) {
		ah_db_rollback(r->db);
		return AH_ECONFLICT;
	}
	if (ah_db_exec(r->db, NULL, SQL_SUPERSEDE_JOBS, "s", a->id) != 0 ||
	    ah_db_exec(r->db, NULL, SQL_ENQUEUE, "s", a->id) != 0 ||
	    ah_db_exec(r->db, NULL, SQL_RECORD_DEPLOY, "sssss", ah_id_new(r->arena, "dep"), r->user->id,
	               r->api_key_id, r->api_key_id, a->id) != 0 || ah_db_commit(r->db) != 0)
		goto fail;
	return 0;
fail:
	ah_db_rollback(r->db);
	return AH_EFAIL;
}

static int deploy_agent(ah_req *r)
{
	const ah_agent *a;
	int rc = ah_agent_load(r, &a);
	if (rc != 0)
		return rc;
	if (a->source_type == AH_SOURCE_LOCAL && !a->code_sha256)
		return ah_reply_error(r, 400, "No code uploaded for this local agent; "
		                      "upload a tarball with PUT /api/v1/agents/{slug}/code first");
	/* A deadlock, or on a cluster a certification conflict with a runner's
	 * claim on another node, rolled it all back: run it again. */
	for (int tries = 0; tries < 4; tries++) {
		rc = start_deploy(r, a);
		if (rc != AH_EFAIL || !ah_db_deadlocked(r->db))
			break;
		usleep(10000u << tries);
	}
	if (rc == AH_ECONFLICT)
		return ah_reply_error(r, 409, "A deploy is already running for this agent");
	return rc == 0 ? reply_agent_by_id(r, 202, a->id) : rc;
}

static int stop_sandbox(ah_req *r)
{
	const ah_agent *a;
	int rc = ah_agent_load(r, &a);
	if (rc != 0)
		return rc;
	if (a->status != AH_AGENT_ACTIVE)
		return ah_reply_error(r, 409, ah_sprintf(r->arena, "Agent has no running sandbox (status: %s)",
		                      ah_agent_status_names[a->status]));
	if (ah_runner_destroy_agent(r, a->id) != 0)
		return ah_reply_error(r, 503, "The sandbox runner is not reachable; try again");
	if (ah_db_exec(r->db, NULL, SQL_STOP, "s", a->id) != 0 ||
	    ah_db_exec(r->db, NULL, SQL_END_SESSIONS, "s", a->id) != 0)
		return AH_EFAIL;
	return reply_agent_by_id(r, 200, a->id);
}

const ah_route ah_agents_routes[] = {
	{"GET", "/agents", list_agents, 0, 0},
	{"POST", "/agents", create_agent, 0, 0},
	{"GET", "/agents/{slug}", get_agent, 0, 0, AH_AGENT_SCOPE},
	{"PATCH", "/agents/{slug}", patch_agent, 0, 0, AH_AGENT_SCOPE},
	{"DELETE", "/agents/{slug}", delete_agent, 0, 0, AH_AGENT_SCOPE},
	{"POST", "/agents/{slug}/deploy", deploy_agent, 0, 0, AH_AGENT_SCOPE},
	{"DELETE", "/agents/{slug}/sandbox", stop_sandbox, 0, 0, AH_AGENT_SCOPE},
	{NULL, NULL, NULL, 0, 0},
};
