/* secrets list|set|delete: an agent's secrets. A value comes from stdin or a
 * prompt without echo, never from the command line unless --value says so:
 * other local users can read a process's arguments. */
#include "cli/cli.h"

#define VALUE_CAP (64 * 1024)

static const struct ah_cli_col secret_cols[] = {
	{"key", "key", AH_COL_TEXT},
	{"created", "created_at", AH_COL_TIME},
	{"updated", "updated_at", AH_COL_TIME},
	{0},
};

static const char *secrets_path(struct ah_cli *c, const char *slug)
{
	return ah_sprintf(c->a, "/agents/%s/secrets", ah_cli_seg(c, slug));
}

static int run_list(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	return ah_cli_list(c, secrets_path(c, a->pos[0]), secret_cols, err);
}

struct secret_opts {
	const char *value;
};

static int run_set(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	char *value = (char *)((const struct secret_opts *)a->opts)->value;
	int rc = 0;
	if (!value)
		rc = ah_cli_read_secret(c, ah_sprintf(c->a, "Value of %s", a->pos[1]), VALUE_CAP, &value, err);
	if (rc)
		return rc;
	json_object *body = ah_cli_obj(c);
	json_object_object_add(body, "key", json_object_new_string(a->pos[1]));
	json_object_object_add(body, "value", json_object_new_string(value));
	rc = ah_cli_send(c, "POST", secrets_path(c, a->pos[0]), body, &r, err);
	if (rc)
		return rc;
	if (c->json)
		ah_cli_print_json(c, r.body);
	else
		ah_cli_note(c, "Set %s on %s (applies to the next invocation)", a->pos[1], a->pos[0]);
	return 0;
}

static int run_delete(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	const char *path = ah_sprintf(c->a, "%s/%s", secrets_path(c, a->pos[0]), ah_cli_seg(c, a->pos[1]));
	int rc = ah_cli_send(c, "DELETE", path, NULL, &r, err);
	if (!rc)
		ah_cli_note(c, "Deleted %s from %s", a->pos[1], a->pos[0]);
	return rc;
}

const struct ah_cli_cmd ah_cli_secrets_cmds[] = {
	{"secrets list", "SLUG", "list an agent's secrets (names only; values are never returned)", 1, 1,
	 false, run_list, {{0}}},
	{"secrets set", "SLUG KEY", "set a secret, reading the value from stdin or a prompt without echo", 2, 2,
	 false, run_set,
	 {AH_OPT_STRING("value", 0, "VALUE", struct secret_opts, value,
	                "the value on the command line (visible to other local users; avoid)")},
	 sizeof(struct secret_opts)},
	{"secrets delete", "SLUG KEY", "delete a secret", 2, 2, false, run_delete, {{0}}},
	{0},
};
