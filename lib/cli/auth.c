/* login, whoami, logout: the API key this client uses and where it is kept. */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

static const struct ah_cli_col user_cols[] = {
	{"id", "id", AH_COL_TEXT},
	{"email", "email", AH_COL_TEXT},
	{"plan", "plan", AH_COL_TEXT},
	{"quota bytes", "quota_bytes", AH_COL_NUM},
	{"created", "created_at", AH_COL_TIME},
	{0},
};

/* The URL to log in to: --url or AGENTHOST_URL as given, else asked on a
 * terminal (the stored one as the default), else the stored or default one. */
static int login_url(struct ah_cli *c, char **out, ah_err *err)
{
	const char *env = getenv("AGENTHOST_URL");
	if (c->url_flag || (env && *env) || !c->tty_in) {
		*out = ah_strdup(c->a, c->url);
		return 0;
	}
	int rc = ah_cli_ask(c, "API URL", c->url, out, err);
	if (rc)
		return rc;   /* *out is not set then */
	size_t n = strlen(*out);
	while (n && (*out)[n - 1] == '/')
		(*out)[--n] = 0;
	/* Now, while the key is still to be typed: the user may stop here. */
	ah_cli_warn_plain_http(c, *out);
	return 0;
}

struct login_opts {
	const char *key;
};

static int run_login(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	char *url, *key;
	struct ah_cli_resp r;
	int rc = login_url(c, &url, err);
	if (rc)
		return rc;
	const char *flag = ((const struct login_opts *)a->opts)->key;
	if (flag)
		key = ah_strdup(c->a, flag);
	else if ((rc = ah_cli_read_secret(c, "API key", 512, &key, err)))
		return rc;
	key += strspn(key, " \t");
	key[strcspn(key, " \t\r\n")] = 0;
	if (!*key)
		return ah_cli_usage(err, "no API key given");
	c->url = url;
	c->key = key;
	if ((rc = ah_cli_get(c, "/users/me", &r, err)))
		return rc;
	if ((rc = ah_cli_config_save(c, url, key, err)))
		return rc;
	if (c->json)
		ah_cli_print_json(c, r.body);
	else
		printf("Logged in to %s as %s (plan %s); saved in %s\n", url,
		       ah_cli_text(c, r.body, "email", AH_COL_TEXT), ah_cli_text(c, r.body, "plan", AH_COL_TEXT),
		       c->config_path);
	return 0;
}

static int run_whoami(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	(void)a;
	int rc = ah_cli_get(c, "/users/me", &r, err);
	if (rc)
		return rc;
	ah_cli_show(c, r.body, user_cols);
	if (!c->json)
		printf("%-*s %s\n", 12, "api:", c->url);
	return 0;
}

static int run_logout(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	bool removed;
	(void)a;
	int rc = ah_cli_config_remove(c, &removed, err);
	if (rc)
		return rc;
	if (removed)
		ah_cli_note(c, "Logged out: removed %s (the key itself stays valid; agenthost keys revoke ID ends it)",
		            c->config_path);
	else
		ah_cli_note(c, "Not logged in (no %s)", c->config_path);
	if (getenv("AGENTHOST_API_KEY"))
		ah_cli_note(c, "AGENTHOST_API_KEY is still set in this environment");
	return 0;
}

const struct ah_cli_cmd ah_cli_auth_cmds[] = {
	{"login", NULL, "check an API key and store it with the URL (the key is read without echo, or from stdin)",
	 0, 0, true, run_login,
	 {AH_OPT_STRING("key", 0, "KEY", struct login_opts, key,
	                "the API key (visible to other local users while this runs; prefer stdin)")},
	 sizeof(struct login_opts)},
	{"whoami", NULL, "show the user the stored key belongs to", 0, 0, false, run_whoami, {{0}}},
	{"logout", NULL, "forget the stored URL and key", 0, 0, true, run_logout, {{0}}},
	{0},
};
