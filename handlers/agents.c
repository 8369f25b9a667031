/* /agents: register, list, read, change and delete agents, plus the lifecycle
 * endpoints that only queue work (deploy) or ask the runner (sandbox stop).
 * Deploys themselves happen in agenthost-runner. */
#include "agents.h"
#include "auth/auth.h"
#include "list.h"
#include "routes.h"
#include "runner_client/runner_client.h"
#include "code.h"
#include "core/util.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char SQL_GET[] =
	"SELECT " AH_AGENT_COLS " FROM agents a WHERE a.user_id = ? AND a.slug = ?";
static const char SQL_GET_ID[] =
	"SELECT " AH_AGENT_COLS " FROM agents a WHERE a.id = ?";
static const char SQL_LIST[] =
	"SELECT " AH_AGENT_COLS " FROM agents a WHERE a.user_id = ?"
	" ORDER BY a.created_at DESC, a.id DESC LIMIT ? OFFSET ?";
static const char SQL_COUNT[] = "SELECT COUNT(*) FROM agents WHERE user_id = ?";
static const char SQL_SLUG_TAKEN[] = "SELECT 1 FROM agents WHERE user_id = ? AND slug = ?";
static const char SQL_INSERT[] =
	"INSERT INTO agents (id, user_id, name, slug, description, source_type, git_repo_url,"
	" git_branch, timeout_seconds, status, needs_redeploy, created_at, updated_at)"
	" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'draft', 0, NOW(3), NOW(3))";
static const char SQL_UPDATE[] =
	"UPDATE agents SET name = ?, slug = ?, description = ?, source_type = ?, git_repo_url = ?,"
	" git_branch = ?, timeout_seconds = ?, needs_redeploy = ?, updated_at = NOW(3) WHERE id = ?";
static const char SQL_DELETE[] = "DELETE FROM agents WHERE id = ?";
static const char SQL_START_DEPLOY[] =
	"UPDATE agents SET status = 'deploying', status_message = NULL, updated_at = NOW(3)"
	" WHERE id = ? AND status <> 'deploying'";
static const char SQL_SUPERSEDE_JOBS[] =
	"UPDATE deploy_jobs SET state = 'failed', error = 'superseded', updated_at = NOW(3)"
	" WHERE agent_id = ? AND state = 'queued'";
static const char SQL_ENQUEUE[] =
	"INSERT INTO deploy_jobs (agent_id, state, created_at, updated_at)"
	" VALUES (?, 'queued', NOW(3), NOW(3))";
static const char SQL_STOP[] =
	"UPDATE agents SET status = 'stopped', sandbox_id = NULL, updated_at = NOW(3) WHERE id = ?";
static const char SQL_END_SESSIONS[] =
	"UPDATE sessions SET state = 'ended', sandbox_id = NULL WHERE agent_id = ? AND state = 'active'";

/* ---- shared with nested resources ---- */

const char ah_agent_scope_sql[] =
	"SELECT " AH_AUTH_KEY_COLS ", " AH_AGENT_COLS " FROM " AH_AUTH_KEY_FROM
	" LEFT JOIN agents a ON a.user_id = u.id AND a.slug = ? WHERE k.key_id = ?";

int ah_agent_load(ah_req *r, char ***out)
{
	ah_rows rows;
	if (r->scope_loaded) {
		if (!r->scope_row)
			return ah_reply_error(r, 404, "Agent not found");
		*out = r->scope_row;
		return 0;
	}
	if (ah_db_query(r->db, r->arena, &rows, SQL_GET, "ss", r->user->id, r->params[0]) != 0)
		return AH_EFAIL;
	if (rows.n == 0)
		return ah_reply_error(r, 404, "Agent not found");
	*out = rows.v[0];
	return 0;
}

json_object *ah_agent_json(ah_req *r, char **v)
{
	json_object *o = json_object_new_object();
	ah_json_str(o, "id", v[AG_ID]);
	ah_json_str(o, "name", v[AG_NAME]);
	ah_json_str(o, "slug", v[AG_SLUG]);
	ah_json_str(o, "description", v[AG_DESCRIPTION]);
	ah_json_str(o, "source_type", v[AG_SOURCE_TYPE]);
	ah_json_str(o, "git_repo_url", v[AG_GIT_REPO_URL]);
	ah_json_str(o, "git_branch", v[AG_GIT_BRANCH]);
	long long t = 120;
	ah_parse_ll(&t, v[AG_TIMEOUT]);
	ah_json_int(o, "timeout_seconds", t);
	ah_json_str(o, "status", v[AG_STATUS]);
	ah_json_str(o, "status_message", v[AG_STATUS_MESSAGE]);
	ah_json_str(o, "sandbox_id", v[AG_SANDBOX_ID]);
	ah_json_bool(o, "needs_redeploy", strcmp(v[AG_NEEDS_REDEPLOY], "1") == 0);
	ah_json_time(r, o, "created_at", v[AG_CREATED_AT]);
	ah_json_time(r, o, "updated_at", v[AG_UPDATED_AT]);
	ah_json_time(r, o, "deployed_at", v[AG_DEPLOYED_AT]);
	return o;
}

static int reply_agent_by_id(ah_req *r, int status, const char *id)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, SQL_GET_ID, "s", id) != 0 || rows.n != 1)
		return AH_EFAIL;
	return ah_reply_json(r, status, ah_agent_json(r, rows.v[0]));
}

/* ---- input ---- */

typedef struct agent_in {
	const char *name, *slug, *description, *source_type, *git_repo_url, *git_branch;
	long long timeout;
	bool has_name, has_slug, has_description, has_source_type, has_repo, has_branch, has_timeout;
} agent_in;

static const char *const AGENT_FIELDS[] = {"name", "slug", "description", "source_type",
                                           "git_repo_url", "git_branch", "timeout_seconds", NULL};

bool ah_slug_valid(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		bool alnum = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9');
		if (!alnum && !(s[i] == '-' && s[i + 1] != '-'))
			return false;
	}
	return true;
}

/* https://, http://, ssh://, git:// URLs or scp-like user@host:path. The runner
 * decides which hosts may be reached; this only rejects what is not a URL. */
static bool repo_url_valid(const char *u)
{
	static const char *const schemes[] = {"https://", "http://", "ssh://", "git://", NULL};
	for (const char *p = u; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return false;
	for (size_t i = 0; schemes[i]; i++)
		if (strncmp(u, schemes[i], strlen(schemes[i])) == 0)
			return strlen(u) > strlen(schemes[i]) + 1;
	const char *at = strchr(u, '@'), *colon = strchr(u, ':');
	return at && colon && at < colon && colon[1] != '\0' && !strstr(u, "://");
}

/* git check-ref-format, in brief: what could never name a branch or tag. */
static bool branch_valid(const char *b)
{
	if (!*b || b[0] == '-' || b[0] == '/' || strstr(b, "..") || strstr(b, "@{") ||
	    strstr(b, "//") || b[strlen(b) - 1] == '/' || b[strlen(b) - 1] == '.')
		return false;
	for (const char *p = b; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f || strchr("~^:?*[\\", *p))
			return false;
	return true;
}

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
	    in->git_repo_url && !repo_url_valid(in->git_repo_url))
		ah_verr(r, "body", "git_repo_url",
		        "Input should be a git URL (https://, ssh://, git:// or user@host:path)", "url_parsing");
	if (ah_field_str(r, o, "git_branch", AH_F_NULLABLE, 1, 255, &in->git_branch, &in->has_branch) == 0 &&
	    in->git_branch && !branch_valid(in->git_branch))
		ah_verr(r, "body", "git_branch", "Input should be a valid branch or tag name", "value_error");
	ah_field_int(r, o, "timeout_seconds", 0, 1, 600, &in->timeout, &in->has_timeout);
}

/* Slug from a name: lowercase, runs of other characters become one '-', trimmed,
 * cut to max characters. */
static char *slugify(ah_req *r, const char *name, size_t max)
{
	char *s = ah_alloc(r->arena, strlen(name) + 2);
	size_t n = 0;
	for (const char *p = name; *p; p++) {
		char c = (char)tolower((unsigned char)*p);
		bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (ok)
			s[n++] = c;
		else if (n > 0 && s[n - 1] != '-')
			s[n++] = '-';
	}
	if (n > max)
		n = max;
	while (n > 0 && s[n - 1] == '-')
		n--;
	s[n] = '\0';
	return n ? s : ah_strdup(r->arena, "agent");
}

/* The derived slug, or with -2, -3, … appended until it is free. */
static int free_slug(ah_req *r, const char *name, const char **out)
{
	const char *base = slugify(r, name, 63);
	for (int i = 1; i < 10000; i++) {
		const char *cand = base;
		if (i > 1) {
			char suffix[16];
			snprintf(suffix, sizeof(suffix), "-%d", i);
			cand = ah_sprintf(r->arena, "%s%s", slugify(r, base, 63 - strlen(suffix)), suffix);
		}
		ah_rows rows;
		if (ah_db_query(r->db, r->arena, &rows, SQL_SLUG_TAKEN, "ss", r->user->id, cand) != 0)
			return AH_EFAIL;
		if (rows.n == 0) {
			*out = cand;
			return 0;
		}
	}
	return AH_ECONFLICT;
}

/* ---- handlers ---- */

static json_object *agent_row_json(ah_req *r, const ah_rows *rows, size_t i)
{
	return ah_agent_json(r, rows->v[i]);
}

static int list_agents(ah_req *r)
{
	return ah_list_reply(r, SQL_COUNT, SQL_LIST, r->user->id, agent_row_json);
}

static int create_agent(ah_req *r)
{
	json_object *o;
	agent_in in = {.timeout = 120};
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
		if (!in.slug && free_slug(r, in.name, &slug) != 0)
			return AH_EFAIL;
		rc = ah_db_exec(r->db, NULL, SQL_INSERT, "ssssssssi", id, r->user->id, in.name, slug,
		                in.description, type, in.git_repo_url, in.git_branch, in.timeout);
	}
	if (rc == AH_ECONFLICT)
		return ah_reply_error(r, 409, ah_sprintf(r->arena, "Slug '%s' is already taken", slug));
	if (rc != 0)
		return rc;
	return reply_agent_by_id(r, 201, id);
}

static int get_agent(ah_req *r)
{
	char **a;
	int rc = ah_agent_load(r, &a);
	return rc ? rc : ah_reply_json(r, 200, ah_agent_json(r, a));
}

static bool str_changed(const char *old, const char *now)
{
	return (old == NULL) != (now == NULL) || (old && strcmp(old, now) != 0);
}

static int patch_agent(ah_req *r)
{
	char **a;
	json_object *o;
	agent_in in = {0};
	int rc = ah_agent_load(r, &a);
	if (rc != 0 || (rc = ah_body_object(r, &o, AGENT_FIELDS)) != 0)
		return rc;
	check_agent_fields(r, o, &in, false);
	/* A field that failed validation is present but NULL: never read it below. */
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	const char *type = in.has_source_type ? in.source_type : a[AG_SOURCE_TYPE];
	const char *repo = in.has_repo ? in.git_repo_url : a[AG_GIT_REPO_URL];
	const char *branch = in.has_branch ? in.git_branch : a[AG_GIT_BRANCH];
	if (strcmp(type, "git") == 0 && !repo)
		ah_verr(r, "body", "git_repo_url", "Field required for git agents", "missing");
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	/* Source settings only take effect with the next deploy. */
	bool redeploy = strcmp(a[AG_NEEDS_REDEPLOY], "1") == 0 ||
	                (a[AG_DEPLOYED_AT] && (strcmp(type, a[AG_SOURCE_TYPE]) != 0 ||
	                 str_changed(a[AG_GIT_REPO_URL], repo) || str_changed(a[AG_GIT_BRANCH], branch)));
	long long timeout = 120;
	ah_parse_ll(&timeout, a[AG_TIMEOUT]);
	rc = ah_db_exec(r->db, NULL, SQL_UPDATE, "ssssssiis",
	                in.has_name ? in.name : a[AG_NAME], in.has_slug ? in.slug : a[AG_SLUG],
	                in.has_description ? in.description : a[AG_DESCRIPTION], type, repo, branch,
	                in.has_timeout ? in.timeout : timeout, (long long)redeploy, a[AG_ID]);
	if (rc == AH_ECONFLICT)
		return ah_reply_error(r, 409, ah_sprintf(r->arena, "Slug '%s' is already taken", in.slug));
	return rc ? rc : reply_agent_by_id(r, 200, a[AG_ID]);
}

static int delete_agent(ah_req *r)
{
	char **a;
	int rc = ah_agent_load(r, &a);
	if (rc != 0)
		return rc;
	if (ah_db_exec(r->db, NULL, SQL_DELETE, "s", a[AG_ID]) != 0)
		return AH_EFAIL;
	/* The row first, so that nothing starts a new sandbox of it; then its
	 * runner (named: the row no longer leads to it) drops its sandboxes and
	 * its images at once. An unreachable runner's periodic sweep does it. */
	if (a[AG_RUNNER_ID] && *a[AG_RUNNER_ID])
		ah_runner_forget_agent(r, a[AG_ID], a[AG_RUNNER_ID], true);
	ah_code_remove(r, a[AG_ID]);
	return ah_reply_no_content(r);
}

static int deploy_agent(ah_req *r)
{
	char **a;
	unsigned long long changed = 0;
	int rc = ah_agent_load(r, &a);
	if (rc != 0)
		return rc;
	if (strcmp(a[AG_SOURCE_TYPE], "local") == 0 && !a[AG_CODE_SHA256])
		return ah_reply_error(r, 400, "No code uploaded for this local agent; "
		                      "upload a tarball with PUT /api/v1/agents/{slug}/code first");
	if (ah_db_begin(r->db) != 0)
		return AH_EFAIL;
	if (ah_db_exec(r->db, &changed, SQL_START_DEPLOY, "s", a[AG_ID]) != 0)
		goto fail;
	if (changed == 0) {
		ah_db_rollback(r->db);
		return ah_reply_error(r, 409, "A deploy is already running for this agent");
	}
	if (ah_db_exec(r->db, NULL, SQL_SUPERSEDE_JOBS, "s", a[AG_ID]) != 0 ||
	    ah_db_exec(r->db, NULL, SQL_ENQUEUE, "s", a[AG_ID]) != 0 || ah_db_commit(r->db) != 0)
		goto fail;
	return reply_agent_by_id(r, 202, a[AG_ID]);
fail:
	ah_db_rollback(r->db);
	return AH_EFAIL;
}

static int stop_sandbox(ah_req *r)
{
	char **a;
	int rc = ah_agent_load(r, &a);
	if (rc != 0)
		return rc;
	if (strcmp(a[AG_STATUS], "active") != 0)
		return ah_reply_error(r, 409, ah_sprintf(r->arena,
		                      "Agent has no running sandbox (status: %s)", a[AG_STATUS]));
	if (ah_runner_destroy_agent(r, a[AG_ID]) != 0)
		return ah_reply_error(r, 503, "The sandbox runner is not reachable; try again");
	if (ah_db_exec(r->db, NULL, SQL_STOP, "s", a[AG_ID]) != 0 ||
	    ah_db_exec(r->db, NULL, SQL_END_SESSIONS, "s", a[AG_ID]) != 0)
		return AH_EFAIL;
	return reply_agent_by_id(r, 200, a[AG_ID]);
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
