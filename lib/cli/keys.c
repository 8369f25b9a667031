/* keys list|create|revoke: the user's API keys. */
#include "cli/cli.h"

static const struct ah_cli_col key_cols[] = {
	{"id", "id", AH_COL_TEXT},
	{"name", "name", AH_COL_TEXT},
	{"prefix", "prefix", AH_COL_TEXT},
	{"created", "created_at", AH_COL_TIME},
	{"last used", "last_used_at", AH_COL_TIME},
	AH_CLI_BUDGET_COLS,
	{0},
};

static int run_list(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	(void)a;
	return ah_cli_list(c, "/api-keys?limit=100", key_cols, err);
}

struct key_opts {
	const char *name;
	struct ah_cli_budget budget;
};

static int run_create(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	json_object *body = ah_cli_obj(c);
	if (a->npos)
		json_object_object_add(body, "name", json_object_new_string(a->pos[0]));
	ah_cli_budget_fields(&((const struct key_opts *)a->opts)->budget, body);
	int rc = ah_cli_send(c, "POST", "/api-keys", body, &r, err);
	if (rc)
		return rc;
	if (c->json) {
		ah_cli_print_json(c, r.body);
		return 0;
	}
	json_object *rec = NULL;
	json_object_object_get_ex(r.body, "api_key", &rec);
	/* The key alone on stdout, so that `agenthost keys create | …` takes just it. */
	puts(ah_cli_text(c, r.body, "key", AH_COL_TEXT));
	ah_cli_note(c, "Created key %s (%s); it is shown only this once.",
	            ah_cli_text(c, rec, "id", AH_COL_TEXT), ah_cli_text(c, rec, "prefix", AH_COL_TEXT));
	return 0;
}

static int run_update(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const struct key_opts *o = a->opts;
	struct ah_cli_resp r;
	json_object *body = ah_cli_obj(c);
	if (o->name)
		json_object_object_add(body, "name", json_object_new_string(o->name));
	ah_cli_budget_fields(&o->budget, body);
	if (!json_object_object_length(body))
		return ah_cli_usage(err, "keys update: nothing to change (see agenthost keys update --help)");
	int rc = ah_cli_send(c, "PATCH", ah_sprintf(c->a, "/api-keys/%s", ah_cli_seg(c, a->pos[0])), body,
	                     &r, err);
	if (!rc)
		ah_cli_show(c, r.body, key_cols);
	return rc;
}

static int run_revoke(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	int rc = ah_cli_send(c, "DELETE", ah_sprintf(c->a, "/api-keys/%s", ah_cli_seg(c, a->pos[0])), NULL, &r, err);
	(void)r;
	if (!rc)
		ah_cli_note(c, "Revoked %s", a->pos[0]);
	return rc;
}

const struct ah_cli_cmd ah_cli_keys_cmds[] = {
	{"keys list", NULL, "list your API keys", 0, 0, false, run_list, {{0}}},
	{"keys create", "[NAME]", "make a new API key and print it (once)", 0, 1, false, run_create,
	 {AH_CLI_BUDGET_OPTS(struct key_opts, budget)}, sizeof(struct key_opts)},
	{"keys update", "ID", "rename a key or change its spend limits", 1, 1, false, run_update,
	 {AH_OPT_STRING("name", 0, "NAME", struct key_opts, name, "a new name"),
	  AH_CLI_BUDGET_OPTS(struct key_opts, budget)},
	 sizeof(struct key_opts)},
	{"keys revoke", "ID", "revoke an API key at once", 1, 1, false, run_revoke, {{0}}},
	{0},
};
