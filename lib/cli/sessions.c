/* sessions list|delete and invocations: an agent's sessions and its history. */
#include "cli/cli.h"

static const struct ah_cli_col session_cols[] = {
	{"id", "id", AH_COL_TEXT},
	{"sandbox", "sandbox_id", AH_COL_TEXT},
	{"created", "created_at", AH_COL_TIME},
	{"last invoked", "last_invoked_at", AH_COL_TIME},
	{"invocations", "invocation_count", AH_COL_NUM},
	{0},
};

static const struct ah_cli_col invocation_cols[] = {
	{"id", "invocation_id", AH_COL_TEXT},
	{"session", "session_id", AH_COL_TEXT},
	{"status", "status", AH_COL_STATUS},
	{"in", "input_tokens", AH_COL_NUM},
	{"out", "output_tokens", AH_COL_NUM},
	{"cost usd", "total_cost_usd", AH_COL_NUM},
	{"ms", "duration_ms", AH_COL_NUM},
	{"created", "created_at", AH_COL_TIME},
	{0},
};

static int run_sessions(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const char *q = ah_cli_paging(c, &((const struct ah_cli_list_opts *)a->opts)->page);
	return ah_cli_list(c, ah_sprintf(c->a, "/agents/%s/sessions?%s", ah_cli_seg(c, a->pos[0]), q),
	                   session_cols, err);
}

static int run_delete(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	const char *path = ah_sprintf(c->a, "/agents/%s/sessions/%s", ah_cli_seg(c, a->pos[0]),
	                              ah_cli_seg(c, a->pos[1]));
	int rc = ah_cli_send(c, "DELETE", path, NULL, &r, err);
	if (!rc)
		ah_cli_note(c, "Deleted session %s of %s", a->pos[1], a->pos[0]);
	return rc;
}

static int run_invocations(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const char *q = ah_cli_paging(c, &((const struct ah_cli_list_opts *)a->opts)->page);
	return ah_cli_list(c, ah_sprintf(c->a, "/agents/%s/invocations?%s", ah_cli_seg(c, a->pos[0]), q),
	                   invocation_cols, err);
}

const struct ah_cli_cmd ah_cli_sessions_cmds[] = {
	{"sessions list", "SLUG", "list an agent's sessions", 1, 1, false, run_sessions, AH_CLI_LIST_OPTS},
	{"sessions delete", "SLUG SESSION", "end a session and destroy its sandbox", 2, 2, false, run_delete, {{0}}},
	{"invocations", "SLUG", "an agent's invocation history, newest first", 1, 1, false, run_invocations,
	 AH_CLI_LIST_OPTS},
	{0},
};
