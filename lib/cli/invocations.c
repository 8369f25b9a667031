/* invocations get|cancel SLUG ID (issue 28): one invocation, running or
 * finished, and stopping a running one. */
#include "cli/cli.h"

static const struct ah_cli_col invocation_cols[] = {
	{"id", "invocation_id", AH_COL_TEXT},
	{"session", "session_id", AH_COL_TEXT},
	{"status", "status", AH_COL_STATUS},
	{"error", "error", AH_COL_TEXT},
	{"in", "input_tokens", AH_COL_NUM},
	{"out", "output_tokens", AH_COL_NUM},
	{"cost usd", "total_cost_usd", AH_COL_NUM},
	{"ms", "duration_ms", AH_COL_NUM},
	{"created", "created_at", AH_COL_TIME},
	{0},
};

/* The record; a finished call's response follows it on stdout. */
static void show(struct ah_cli *c, json_object *o)
{
	json_object *v;
	if (c->json) {
		ah_cli_print_json(c, o);
		return;
	}
	ah_cli_show(c, o, invocation_cols);
	if (json_object_object_get_ex(o, "response_content", &v) && v) {
		size_t n = (size_t)json_object_get_string_len(v);
		const char *s = json_object_get_string(v);
		printf("\n");
		fwrite(s, 1, n, stdout);
		if (n && s[n - 1] != '\n')
			putchar('\n');
	}
}

static const char *path_of(struct ah_cli *c, const struct ah_cli_args *a, const char *tail)
{
	return ah_sprintf(c->a, "/agents/%s/invocations/%s%s", ah_cli_seg(c, a->pos[0]),
	                  ah_cli_seg(c, a->pos[1]), tail);
}

static int run_get(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	int rc = ah_cli_get(c, path_of(c, a, ""), &r, err);
	if (!rc)
		show(c, r.body);
	return rc;
}

static int run_cancel(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	struct ah_cli_req rq = {.method = "POST", .path = path_of(c, a, "/cancel"), .timeout = 60};
	int rc = ah_cli_call(c, &rq, &r, err);
	if (rc)
		return rc;
	show(c, r.body);
	if (r.status == 202)
		ah_cli_note(c, "stopping; agenthost invocations get %s %s shows when it has", a->pos[0],
		            a->pos[1]);
	return 0;
}

const struct ah_cli_cmd ah_cli_invocations_cmds[] = {
	{"invocations get", "SLUG ID", "one invocation, running or finished", 2, 2, false, run_get, {{0}}},
	{"invocations cancel", "SLUG ID", "stop a running invocation (it is recorded cancelled)", 2, 2,
	 false, run_cancel, {{0}}},
	{0},
};
