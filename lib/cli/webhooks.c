/* webhooks deliveries SLUG and webhooks secret rotate: an agent's webhook
 * deliveries with their attempts, and the signing secret (printed once). */
#include "cli/cli.h"
#include "core/util.h"

#include <stdio.h>

static const struct ah_cli_col delivery_cols[] = {
	{"id", "id", AH_COL_TEXT},
	{"status", "status", AH_COL_STATUS},
	{"invocation", "invocation_id", AH_COL_TEXT},
	{"attempts", "attempt_count", AH_COL_NUM},
	{"last code", "last_status_code", AH_COL_NUM},
	{"created", "created_at", AH_COL_TIME},
	{"next", "next_attempt_at", AH_COL_TIME},
	{"error", "last_error", AH_COL_TEXT},
	{0},
};

static int run_deliveries(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const char *q = ah_cli_paging(c, &((const struct ah_cli_list_opts *)a->opts)->page);
	return ah_cli_list(c, ah_sprintf(c->a, "/agents/%s/webhook-deliveries?%s",
	                                 ah_cli_seg(c, a->pos[0]), q), delivery_cols, err);
}

static int run_rotate(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	(void)a;
	int rc = ah_cli_send(c, "POST", "/users/me/webhook-secret", NULL, &r, err);
	if (rc)
		return rc;
	if (c->json) {
		ah_cli_print_json(c, r.body);
		return 0;
	}
	/* The secret alone on stdout, so that `… | your-secret-store` takes just it. */
	puts(ah_cli_text(c, r.body, "secret", AH_COL_TEXT));
	ah_cli_note(c, "New webhook signing secret; it is shown only this once and replaces the one "
	            "before. Receivers check Agenthost-Signature with it (README, Webhooks).");
	return 0;
}

const struct ah_cli_cmd ah_cli_webhooks_cmds[] = {
	{"webhooks deliveries", "SLUG", "an agent's webhook deliveries and their attempts", 1, 1, false,
	 run_deliveries, AH_CLI_LIST_OPTS},
	{"webhooks secret rotate", NULL, "make a new webhook signing secret and print it (once)", 0, 0,
	 false, run_rotate, {{0}}},
	{0},
};
