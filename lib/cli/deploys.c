/* deploys, deploys logs and rollback: an agent's deploy history, one deploy's
 * build output (followed while it runs), and the switch back to a kept image. */
#include "cli/cli.h"
#include "core/util.h"

#include <string.h>
#include <unistd.h>

static const struct ah_cli_col deploy_cols[] = {
	{"id", "id", AH_COL_TEXT},
	{"status", "status", AH_COL_STATUS},
	{"active", "active", AH_COL_BOOL},
	{"image", "image_sha256", AH_COL_TEXT},
	{"kept", "image_kept", AH_COL_BOOL},
	{"created", "created_at", AH_COL_TIME},
	{"ms", "duration_ms", AH_COL_NUM},
	{"error", "error", AH_COL_TEXT},
	{0},
};

struct deploys_opts {
	struct ah_cli_paging page;
	bool follow;
};

static int run_list(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const char *q = ah_cli_paging(c, &((const struct deploys_opts *)a->opts)->page);
	return ah_cli_list(c, ah_sprintf(c->a, "/agents/%s/deploys?%s", ah_cli_seg(c, a->pos[0]), q),
	                   deploy_cols, err);
}

static const char *str_of(json_object *o, const char *key)
{
	json_object *v;
	return o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
	       ? json_object_get_string(v) : NULL;
}

static bool bool_of(json_object *o, const char *key)
{
	json_object *v;
	return o && json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

/* The newest deploy's id, for `deploys logs SLUG` without an id. */
static int newest_id(struct ah_cli *c, const char *slug, const char **out, ah_err *err)
{
	struct ah_cli_resp r;
	int rc = ah_cli_get(c, ah_sprintf(c->a, "/agents/%s/deploys?limit=1", ah_cli_seg(c, slug)), &r, err);
	if (rc)
		return rc;
	json_object *first = r.body && json_object_is_type(r.body, json_type_array) &&
	                     json_object_array_length(r.body) > 0 ? json_object_array_get_idx(r.body, 0) : NULL;
	if (!(*out = str_of(first, "id")))
		return ah_err_set(err, AH_EFAIL, "Agent %s has no deploys yet", slug);
	return 0;
}

/* What is new in text since the last poll printed `shown` of it. While the log
 * is under its cap it only grows; once its head is cut, the bytes counter
 * says how much is new. */
static const char *new_part(const char *text, size_t len, const char *shown, size_t shown_len,
                            long long grew)
{
	if (shown_len <= len && memcmp(text, shown, shown_len) == 0)
		return text + shown_len;
	if (grew <= 0)
		return text + len;
	return text + (len > (size_t)grew ? len - (size_t)grew : 0);
}

static int run_logs(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const char *id = a->npos > 1 ? a->pos[1] : NULL, *shown = "";
	bool follow = ((const struct deploys_opts *)a->opts)->follow;
	long long bytes = 0;
	int rc = id ? 0 : newest_id(c, a->pos[0], &id, err);
	const char *path = rc ? NULL : ah_sprintf(c->a, "/agents/%s/deploys/%s/logs",
	                                          ah_cli_seg(c, a->pos[0]), ah_cli_seg(c, id));
	while (rc == 0) {
		struct ah_cli_resp r;
		if ((rc = ah_cli_get(c, path, &r, err)) != 0)
			break;
		if (c->json && !follow) {
			ah_cli_print_json(c, r.body);
			break;
		}
		const char *text = str_of(r.body, "log");
		json_object *b;
		long long now = json_object_object_get_ex(r.body, "bytes", &b) ? json_object_get_int64(b) : 0;
		text = text ? text : "";
		fputs(new_part(text, strlen(text), shown, strlen(shown), now - bytes), stdout);
		fflush(stdout);
		shown = ah_sprintf(c->a, "%s", text);
		bytes = now;
		if (!follow || bool_of(r.body, "done")) {
			const char *status = str_of(r.body, "status");
			if (follow && status && strcmp(status, "failed") == 0)
				rc = ah_err_set(err, AH_EFAIL, "Deploy %s failed", id);
			break;
		}
		sleep(1);
	}
	return rc;
}

static int run_rollback(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	json_object *body = ah_cli_obj(c);
	if (a->npos > 1)
		json_object_object_add(body, "deploy_id", json_object_new_string(a->pos[1]));
	int rc = ah_cli_send(c, "POST", ah_sprintf(c->a, "/agents/%s/rollback", ah_cli_seg(c, a->pos[0])),
	                     body, &r, err);
	if (rc)
		return rc;
	if (c->json)
		ah_cli_print_json(c, r.body);
	else
		printf("%s: rolled back to deploy %s (image %.12s)\n", a->pos[0], str_of(r.body, "id"),
		       str_of(r.body, "image_sha256") ? str_of(r.body, "image_sha256") : "-");
	return 0;
}

const struct ah_cli_cmd ah_cli_deploys_cmds[] = {
	{"deploys", "SLUG", "an agent's deploys, newest first", 1, 1, false, run_list,
	 {AH_CLI_PAGING_OPTS(struct deploys_opts, page)}, sizeof(struct deploys_opts)},
	{"deploys logs", "SLUG [DEPLOY_ID]", "a deploy's build output (default: the newest deploy)", 1, 2,
	 false, run_logs, {AH_OPT_BOOL("follow", 'f', struct deploys_opts, follow, "keep printing until the deploy ends")},
	 sizeof(struct deploys_opts)},
	{"rollback", "SLUG [DEPLOY_ID]", "switch the agent back to a kept image (default: the previous one)",
	 1, 2, false, run_rollback, {{0}}},
	{0},
};
