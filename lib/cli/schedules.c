/* schedules list|get|create|update|pause|resume|delete: an agent invoked with
 * a prompt at the times of a cron expression in a time zone (issue 32). Each
 * run is an ordinary invocation (`agenthost logs`, the history) marked
 * trigger "schedule". create and get show the next five run times. */
#include "cli/cli.h"

static const struct ah_cli_col schedule_list_cols[] = {
	{"id", "id", AH_COL_TEXT},
	{"cron", "cron", AH_COL_TEXT},
	{"timezone", "timezone", AH_COL_TEXT},
	{"paused", "paused", AH_COL_BOOL},
	{"next run", "next_run_at", AH_COL_TIME},
	{"last run", "last_run_at", AH_COL_TIME},
	{"last status", "last_status", AH_COL_TEXT},
	{"runs", "run_count", AH_COL_NUM},
	{0},
};

static const struct ah_cli_col schedule_cols[] = {
	{"id", "id", AH_COL_TEXT},
	{"cron", "cron", AH_COL_TEXT},
	{"timezone", "timezone", AH_COL_TEXT},
	{"prompt", "prompt", AH_COL_TEXT},
	{"session", "session_id", AH_COL_TEXT},
	{"webhook", "webhook_url", AH_COL_TEXT},
	{"paused", "paused", AH_COL_BOOL},
	{"next run", "next_run_at", AH_COL_TIME},
	{"last run", "last_run_at", AH_COL_TIME},
	{"last status", "last_status", AH_COL_TEXT},
	{"last error", "last_error", AH_COL_TEXT},
	{"last invocation", "last_invocation_id", AH_COL_TEXT},
	{"runs", "run_count", AH_COL_NUM},
	{"created", "created_at", AH_COL_TIME},
	{0},
};

static const char *schedules_path(struct ah_cli *c, const struct ah_cli_args *a)
{
	const char *p = ah_sprintf(c->a, "/agents/%s/schedules", ah_cli_seg(c, a->pos[0]));
	return a->npos > 1 ? ah_sprintf(c->a, "%s/%s", p, ah_cli_seg(c, a->pos[1])) : p;
}

/* The record, then its next run times one a line (a table cell holds one). */
static void show(struct ah_cli *c, json_object *o)
{
	json_object *runs;
	ah_cli_show(c, o, schedule_cols);
	if (c->json || !json_object_object_get_ex(o, "next_runs", &runs) ||
	    !json_object_is_type(runs, json_type_array))
		return;
	printf("next runs:\n");
	for (size_t i = 0; i < json_object_array_length(runs); i++)
		printf("  %s\n", json_object_get_string(json_object_array_get_idx(runs, i)));
}

/* The options of the commands below, one struct for all (a member without a
 * row in a command's table stays unset). */
struct schedule_opts {
	struct ah_cli_paging page;
	const char *cron, *prompt, *timezone, *session, *webhook;
	bool paused;
};

static int run_list(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const char *q = ah_cli_paging(c, &((const struct schedule_opts *)a->opts)->page);
	return ah_cli_list(c, ah_sprintf(c->a, "%s?%s", schedules_path(c, a), q), schedule_list_cols, err);
}

static int run_get(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	int rc = ah_cli_get(c, schedules_path(c, a), &r, err);
	if (!rc)
		show(c, r.body);
	return rc;
}

/* The options create and update share, into body. */
static void fields(struct ah_cli *c, const struct ah_cli_args *a, json_object *body)
{
	const struct schedule_opts *o = a->opts;
	const struct { const char *v, *field; } opts[] = {{o->cron, "cron"}, {o->prompt, "prompt"},
	                                                  {o->timezone, "timezone"}, {o->session, "session_id"},
	                                                  {o->webhook, "webhook_url"}};
	(void)c;
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		if (opts[i].v)
			json_object_object_add(body, opts[i].field, json_object_new_string(opts[i].v));
	if (o->paused)
		json_object_object_add(body, "paused", json_object_new_boolean(1));
}

static int send_show(struct ah_cli *c, const char *method, const char *path, json_object *body,
                     ah_err *err)
{
	struct ah_cli_resp r;
	int rc = ah_cli_send(c, method, path, body, &r, err);
	if (!rc)
		show(c, r.body);
	return rc;
}

static int run_create(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	json_object *body = ah_cli_obj(c);
	json_object_object_add(body, "cron", json_object_new_string(a->pos[1]));
	fields(c, a, body);
	return send_show(c, "POST", ah_sprintf(c->a, "/agents/%s/schedules", ah_cli_seg(c, a->pos[0])),
	                 body, err);
}

static int run_update(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	json_object *body = ah_cli_obj(c);
	fields(c, a, body);
	return send_show(c, "PATCH", schedules_path(c, a), body, err);
}

static int set_paused(struct ah_cli *c, const struct ah_cli_args *a, bool paused, ah_err *err)
{
	json_object *body = ah_cli_obj(c);
	json_object_object_add(body, "paused", json_object_new_boolean(paused));
	return send_show(c, "PATCH", schedules_path(c, a), body, err);
}

static int run_pause(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	return set_paused(c, a, true, err);
}

static int run_resume(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	return set_paused(c, a, false, err);
}

static int run_delete(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	int rc = ah_cli_send(c, "DELETE", schedules_path(c, a), NULL, &r, err);
	if (!rc)
		ah_cli_note(c, "Deleted schedule %s of %s", a->pos[1], a->pos[0]);
	return rc;
}

#define O struct schedule_opts
#define SCHEDULE_OPTS(prompt_help)                                                                \
	AH_OPT_STRING("prompt", 'p', "TEXT", O, prompt, prompt_help),                                 \
	AH_OPT_STRING("timezone", 0, "ZONE", O, timezone, "IANA time zone of the expression (default UTC)"), \
	AH_OPT_STRING("session", 0, "ID", O, session, "run in this session (default: a fresh session each run)"), \
	AH_OPT_STRING("webhook", 0, "URL", O, webhook, "a URL told of each run's end")

const struct ah_cli_cmd ah_cli_schedules_cmds[] = {
	{"schedules list", "SLUG", "list an agent's schedules", 1, 1, false, run_list,
	 {AH_CLI_PAGING_OPTS(O, page)}, sizeof(O)},
	{"schedules get", "SLUG ID", "show a schedule and its next five run times", 2, 2, false, run_get, {{0}}},
	{"schedules create", "SLUG CRON", "run the agent at the times of CRON (5 fields, e.g. '0 9 * * 1-5')",
	 2, 2, false, run_create,
	 {SCHEDULE_OPTS("the prompt each run sends (required)"), AH_OPT_BOOL("paused", 0, O, paused, "create it paused")},
	 sizeof(O)},
	{"schedules update", "SLUG ID", "change a schedule", 2, 2, false, run_update,
	 {AH_OPT_STRING("cron", 0, "CRON", O, cron, "a new expression"), SCHEDULE_OPTS("a new prompt")}, sizeof(O)},
	{"schedules pause", "SLUG ID", "stop a schedule's runs until resumed", 2, 2, false, run_pause, {{0}}},
	{"schedules resume", "SLUG ID", "run again from the next tick (missed ones do not run)", 2, 2, false,
	 run_resume, {{0}}},
	{"schedules delete", "SLUG ID", "delete a schedule", 2, 2, false, run_delete, {{0}}},
	{0},
};
