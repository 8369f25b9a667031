/* logs: an invocation's logs (the end of its agent's stderr, secrets
 * redacted by the runner), the latest invocation's unless --invocation names
 * one. The text goes to stdout as the agent wrote it; on a terminal, control
 * characters other than newline and tab are shown as \xNN, so that an agent
 * cannot drive the user's terminal. Which invocation, and whether its start
 * was cut, go to stderr. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

/* The newest invocation's id, or a clear error when there is none. */
static int latest(struct ah_cli *c, const char *slug, const char **out, ah_err *err)
{
	struct ah_cli_resp r;
	int rc = ah_cli_get(c, ah_sprintf(c->a, "/agents/%s/invocations?limit=1", ah_cli_seg(c, slug)),
	                    &r, err);
	if (rc)
		return rc;
	json_object *first = json_object_is_type(r.body, json_type_array) &&
	                     json_object_array_length(r.body) > 0 ? json_object_array_get_idx(r.body, 0) : NULL;
	json_object *id = NULL;
	if (!first || !json_object_object_get_ex(first, "invocation_id", &id) || !id)
		return ah_err_set(err, AH_EFAIL, "%s has no invocations yet", slug);
	*out = ah_strdup(c->a, json_object_get_string(id));
	return 0;
}

static void print_logs(struct ah_cli *c, const char *s, size_t n)
{
	if (!c->tty_out) {
		fwrite(s, 1, n, stdout);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if ((ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f)
			printf("\\x%02x", ch);
		else
			putchar(ch);
	}
	if (n && s[n - 1] != '\n')
		putchar('\n');
}

struct logs_opts {
	const char *invocation;
};

static int run_logs(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const char *inv = ((const struct logs_opts *)a->opts)->invocation;
	struct ah_cli_resp r;
	int rc = inv ? 0 : latest(c, a->pos[0], &inv, err);
	if (!rc)
		rc = ah_cli_get(c, ah_sprintf(c->a, "/agents/%s/invocations/%s/logs", ah_cli_seg(c, a->pos[0]),
		                              ah_cli_seg(c, inv)), &r, err);
	if (rc)
		return rc;
	if (c->json) {
		ah_cli_print_json(c, r.body);
		return 0;
	}
	json_object *logs = NULL, *cut = NULL;
	json_object_object_get_ex(r.body, "logs", &logs);
	json_object_object_get_ex(r.body, "truncated", &cut);
	ah_cli_note(c, "invocation %s%s", ah_cli_text(c, r.body, "invocation_id", AH_COL_TEXT),
	            json_object_get_boolean(cut) ? ": its stderr was longer, this is its last 64 KiB" : "");
	size_t n = logs ? (size_t)json_object_get_string_len(logs) : 0;
	if (!n)
		ah_cli_note(c, "it wrote nothing to stderr");
	print_logs(c, n ? json_object_get_string(logs) : "", n);
	fflush(stdout);
	return 0;
}

const struct ah_cli_cmd ah_cli_logs_cmds[] = {
	{"logs", "SLUG", "an invocation's logs (its stderr, secrets redacted): the latest, or --invocation",
	 1, 1, false, run_logs,
	 {AH_OPT_STRING("invocation", 'I', "ID", struct logs_opts, invocation,
	                "this invocation's logs instead of the latest one's")},
	 sizeof(struct logs_opts)},
	{0},
};
