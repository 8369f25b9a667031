/* agents list|get|create|update|delete and stop: the agent records. */
#include "cli/cli.h"

#include <string.h>

static const struct ah_cli_col list_cols[] = {
	{"slug", "slug", AH_COL_TEXT},
	{"name", "name", AH_COL_TEXT},
	{"source", "source_type", AH_COL_TEXT},
	{"status", "status", AH_COL_STATUS},
	{"deployed", "deployed_at", AH_COL_TIME},
	{0},
};

const struct ah_cli_col ah_cli_agent_cols[] = {
	{"slug", "slug", AH_COL_TEXT},
	{"id", "id", AH_COL_TEXT},
	{"name", "name", AH_COL_TEXT},
	{"description", "description", AH_COL_TEXT},
	{"source", "source_type", AH_COL_TEXT},
	{"git repo", "git_repo_url", AH_COL_TEXT},
	{"git branch", "git_branch", AH_COL_TEXT},
	{"timeout s", "timeout_seconds", AH_COL_NUM},
	{"min warm", "min_warm", AH_COL_NUM},
	{"network", "network", AH_COL_NETWORK},
	{"webhook", "webhook_url", AH_COL_TEXT},
	{"status", "status", AH_COL_STATUS},
	{"message", "status_message", AH_COL_TEXT},
	{"sandbox", "sandbox_id", AH_COL_TEXT},
	{"needs redeploy", "needs_redeploy", AH_COL_BOOL},
	{"created", "created_at", AH_COL_TIME},
	{"updated", "updated_at", AH_COL_TIME},
	{"deployed", "deployed_at", AH_COL_TIME},
	AH_CLI_BUDGET_COLS,
	{0},
};

/* "?limit=N&offset=M" from --limit and --offset. */
const char *ah_cli_paging(struct ah_cli *c, const struct ah_cli_paging *p)
{
	return ah_sprintf(c->a, "limit=%lld&offset=%lld", p->limit.set ? p->limit.n : 20,
	                  p->offset.set ? p->offset.n : 0);
}

/* A list and, on a terminal, how much of it there is beyond this page. */
int ah_cli_list(struct ah_cli *c, const char *path, const struct ah_cli_col *cols, ah_err *err)
{
	struct ah_cli_resp r;
	int rc = ah_cli_get(c, path, &r, err);
	if (rc)
		return rc;
	if (!json_object_is_type(r.body, json_type_array))
		return ah_err_set(err, AH_EFAIL, "the API answered %s with something other than a list", path);
	ah_cli_show(c, r.body, cols);
	size_t n = json_object_array_length(r.body);
	if (!c->json && c->tty_err && r.total > (long long)n && n)
		ah_cli_note(c, "(%zu of %lld; --limit and --offset show more)", n, r.total);
	return 0;
}

/* The options of the commands below, one struct for all (a member without a
 * row in a command's table stays unset). */
struct agent_opts {
	struct ah_cli_paging page;
	const char *slug, *description, *git_url, *branch, *source, *name, *webhook_url, *allow;
	bool local, open_network, yes;
	struct ah_cli_int timeout, min_warm;
	struct ah_cli_budget budget;
};

static int run_list(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const struct agent_opts *o = a->opts;
	return ah_cli_list(c, ah_sprintf(c->a, "/agents?%s", ah_cli_paging(c, &o->page)), list_cols, err);
}

static int run_get(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	int rc = ah_cli_get(c, ah_sprintf(c->a, "/agents/%s", ah_cli_seg(c, a->pos[0])), &r, err);
	if (!rc)
		ah_cli_show(c, r.body, ah_cli_agent_cols);
	return rc;
}

/* --allow LIST (comma separated; "" allows nothing but the model gateway)
 * or --open-network: the agent's egress (issue 32). */
static int network_field(struct ah_cli *c, const struct agent_opts *o, json_object *body, ah_err *err)
{
	const char *list = o->allow;
	if (list && o->open_network)
		return ah_cli_usage(err, "--allow and --open-network exclude each other");
	if (!list && !o->open_network)
		return 0;
	json_object *net = json_object_new_object();
	json_object_object_add(body, "network", net);
	json_object_object_add(net, "mode", json_object_new_string(list ? "allow" : "open"));
	if (!list)
		return 0;
	json_object *allow = json_object_new_array();
	json_object_object_add(net, "allow", allow);
	for (const char *p = list; *p;) {
		size_t n = strcspn(p, ",");
		const char *e = ah_sprintf(c->a, "%.*s", (int)n, p);
		while (*e == ' ')
			e++;
		if (*e)
			json_object_array_add(allow, json_object_new_string(e));
		p += n + (p[n] == ',');
	}
	return 0;
}

/* The record's fields from the options both create and update take. */
static int agent_fields(struct ah_cli *c, const struct agent_opts *o, json_object *body, ah_err *err)
{
	const struct { const char *v, *field; } map[] = {
		{o->slug, "slug"}, {o->description, "description"}, {o->git_url, "git_repo_url"},
		{o->branch, "git_branch"}, {o->source, "source_type"}, {o->name, "name"},
		{o->webhook_url, "webhook_url"},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i].v)
			json_object_object_add(body, map[i].field, json_object_new_string(map[i].v));
	if (o->local)
		json_object_object_add(body, "source_type", json_object_new_string("local"));
	if (o->timeout.set)
		json_object_object_add(body, "timeout_seconds", json_object_new_int64(o->timeout.n));
	/* 0 is a value here (no warm processes), so presence decides. */
	if (o->min_warm.set)
		json_object_object_add(body, "min_warm", json_object_new_int64(o->min_warm.n));
	ah_cli_budget_fields(&o->budget, body);
	int rc = network_field(c, o, body, err);
	/* "" clears the default (null): a flag of its own would be one option too many. */
	json_object *hook;
	if (json_object_object_get_ex(body, "webhook_url", &hook) && !json_object_get_string_len(hook))
		json_object_object_add(body, "webhook_url", NULL);
	return rc;
}

static int run_create(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const struct agent_opts *o = a->opts;
	struct ah_cli_resp r;
	json_object *body = ah_cli_obj(c);
	json_object_object_add(body, "name", json_object_new_string(a->pos[0]));
	if (!o->git_url && !o->source)
		json_object_object_add(body, "source_type", json_object_new_string("local"));
	int rc = agent_fields(c, o, body, err);
	if (!rc)
		rc = ah_cli_send(c, "POST", "/agents", body, &r, err);
	if (!rc)
		ah_cli_show(c, r.body, ah_cli_agent_cols);
	return rc;
}

static int run_update(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	json_object *body = ah_cli_obj(c);
	int rc = agent_fields(c, a->opts, body, err);
	if (rc)
		return rc;
	if (!json_object_object_length(body))
		return ah_cli_usage(err, "agents update: nothing to change (see agenthost agents update --help)");
	rc = ah_cli_send(c, "PATCH", ah_sprintf(c->a, "/agents/%s", ah_cli_seg(c, a->pos[0])), body, &r, err);
	if (!rc)
		ah_cli_show(c, r.body, ah_cli_agent_cols);
	return rc;
}

static int run_delete(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	const char *q = ah_sprintf(c->a, "Delete agent %s with its sandbox, sessions, secrets and history?", a->pos[0]);
	if (!((const struct agent_opts *)a->opts)->yes) {
		if (!c->tty_in)
			return ah_cli_usage(err, "agents delete: not on a terminal; confirm with --yes");
		if (!ah_cli_confirm(c, q))
			return ah_cli_usage(err, "not deleted");
	}
	int rc = ah_cli_send(c, "DELETE", ah_sprintf(c->a, "/agents/%s", ah_cli_seg(c, a->pos[0])), NULL, &r, err);
	if (!rc)
		ah_cli_note(c, "Deleted %s", a->pos[0]);
	return rc;
}

static int run_stop(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	int rc = ah_cli_send(c, "DELETE", ah_sprintf(c->a, "/agents/%s/sandbox", ah_cli_seg(c, a->pos[0])), NULL, &r, err);
	if (rc)
		return rc;
	if (c->json)
		ah_cli_print_json(c, r.body);
	else
		ah_cli_note(c, "%s is %s", a->pos[0], ah_cli_text(c, r.body, "status", AH_COL_TEXT));
	return 0;
}

#define O struct agent_opts
#define FIELD_OPTS \
	AH_OPT_STRING("slug", 0, "SLUG", O, slug, "the URL name (default: derived from the name)"), \
	AH_OPT_STRING("description", 'd', "TEXT", O, description, "what the agent does"), \
	AH_OPT_STRING("git-url", 0, "URL", O, git_url, "deploy from this git repository (source git)"), \
	AH_OPT_STRING("branch", 0, "BRANCH", O, branch, "git branch or tag (default: the remote's default)"), \
	AH_OPT_BOOL("local", 0, O, local, "deploy from uploaded code (agenthost deploy)"), \
	AH_OPT_STRING("source", 0, "git|local", O, source, "the source type"), \
	AH_OPT_INT("timeout", 0, "SECONDS", 1, 600, O, timeout, "default invocation timeout, 1-600"), \
	AH_OPT_INT("min-warm", 0, "N", 0, 1000, O, min_warm, \
	           "processes kept started for the next calls (0: none; capped by plan)"), \
	AH_CLI_BUDGET_OPTS(O, budget), \
	AH_OPT_STRING("allow", 0, "LIST", O, allow, \
	              "egress only to these hosts or CIDRs[:port], comma separated (\"\": none)"), \
	AH_OPT_BOOL("open-network", 0, O, open_network, "egress open again (the default)"), \
	AH_OPT_STRING("webhook-url", 0, "URL", O, webhook_url, \
	              "where finished calls' records are POSTed, signed (\"\": none)")

const struct ah_cli_cmd ah_cli_agents_cmds[] = {
	{"agents list", NULL, "list your agents", 0, 0, false, run_list,
	 {AH_CLI_PAGING_OPTS(O, page)}, sizeof(O)},
	{"agents get", "SLUG", "show one agent", 1, 1, false, run_get, {{0}}},
	{"agents create", "NAME", "register an agent (local unless --git-url)", 1, 1, false, run_create,
	 {FIELD_OPTS}, sizeof(O)},
	{"agents update", "SLUG", "change an agent's settings", 1, 1, false, run_update,
	 {FIELD_OPTS, AH_OPT_STRING("name", 0, "NAME", O, name, "a new name")}, sizeof(O)},
	{"agents delete", "SLUG", "delete an agent with everything it has", 1, 1, false, run_delete,
	 {AH_OPT_BOOL("yes", 'y', O, yes, "do not ask")}, sizeof(O)},
	{"stop", "SLUG", "stop an agent's sandbox (status stopped; deploy starts it again)", 1, 1, false, run_stop,
	 {{0}}},
	{0},
};
