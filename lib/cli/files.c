/* files list|get|update|delete|usage: the managed file records. The
 * transfers (upload, download) are in file_transfer.c. */
#include "cli/cli.h"

#include <string.h>

static const struct ah_cli_col list_cols[] = {
	{"id", "file_id", AH_COL_TEXT},
	{"filename", "filename", AH_COL_TEXT},
	{"size", "size_bytes", AH_COL_NUM},
	{"scope", "scope", AH_COL_TEXT},
	{"status", "status", AH_COL_TEXT},
	{"tags", "tags", AH_COL_TEXT},
	{"created", "created_at", AH_COL_TIME},
	{0},
};

const struct ah_cli_col ah_cli_file_cols[] = {
	{"id", "file_id", AH_COL_TEXT},
	{"filename", "filename", AH_COL_TEXT},
	{"size bytes", "size_bytes", AH_COL_NUM},
	{"content type", "content_type", AH_COL_TEXT},
	{"scope", "scope", AH_COL_TEXT},
	{"status", "status", AH_COL_TEXT},
	{"description", "description", AH_COL_TEXT},
	{"tags", "tags", AH_COL_TEXT},
	{"sha256", "sha256_hash", AH_COL_TEXT},
	{"agent", "agent_slug", AH_COL_TEXT},
	{"session", "session_id", AH_COL_TEXT},
	{"created", "created_at", AH_COL_TIME},
	{"updated", "updated_at", AH_COL_TIME},
	{0},
};

static const struct ah_cli_col usage_cols[] = {
	{"files", "total_files", AH_COL_NUM},
	{"bytes", "total_size_bytes", AH_COL_NUM},
	{"quota bytes", "quota_bytes", AH_COL_NUM},
	{"used percent", "quota_used_percent", AH_COL_NUM},
	{"plan", "plan", AH_COL_TEXT},
	{0},
};

/* The tags member as "a,b" for the tables (json-c would print ["a","b"]). */
static void flatten_tags(struct ah_cli *c, json_object *o)
{
	json_object *t;
	if (!json_object_object_get_ex(o, "tags", &t) || !json_object_is_type(t, json_type_array))
		return;
	const char *csv = "";
	for (size_t i = 0; i < json_object_array_length(t); i++)
		csv = ah_sprintf(c->a, "%s%s%s", csv, i ? "," : "",
		                 json_object_get_string(json_object_array_get_idx(t, i)));
	json_object_object_add(o, "tags", json_object_new_string(csv));
}

void ah_cli_show_file(struct ah_cli *c, json_object *o, const struct ah_cli_col *cols)
{
	if (!c->json) {
		if (json_object_is_type(o, json_type_array))
			for (size_t i = 0; i < json_object_array_length(o); i++)
				flatten_tags(c, json_object_array_get_idx(o, i));
		else
			flatten_tags(c, o);
	}
	ah_cli_show(c, o, cols ? cols : ah_cli_file_cols);
}

static const char *file_path(struct ah_cli *c, const char *id)
{
	return ah_sprintf(c->a, "/files/%s", ah_cli_seg(c, id));
}

static int run_list(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const struct ah_cli_files_opts *o = a->opts;
	const struct { const char *v, *param; } filters[] = {
		{o->scope, "scope"}, {o->tags, "tags"}, {o->search, "search"}};
	const char *q = ah_cli_paging(c, &o->page);
	struct ah_cli_resp r;
	for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++)
		if (filters[i].v)
			q = ah_sprintf(c->a, "%s&%s=%s", q, filters[i].param, ah_cli_seg(c, filters[i].v));
	int rc = ah_cli_get(c, ah_sprintf(c->a, "/files?%s", q), &r, err);
	if (rc)
		return rc;
	if (!json_object_is_type(r.body, json_type_array))
		return ah_err_set(err, AH_EFAIL, "the API answered /files with something other than a list");
	ah_cli_show_file(c, r.body, list_cols);
	size_t n = json_object_array_length(r.body);
	if (!c->json && c->tty_err && r.total > (long long)n && n)
		ah_cli_note(c, "(%zu of %lld; --limit and --offset show more)", n, r.total);
	return 0;
}

static int run_get(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	int rc = ah_cli_get(c, file_path(c, a->pos[0]), &r, err);
	if (!rc)
		ah_cli_show_file(c, r.body, NULL);
	return rc;
}

/* "a,b" as the JSON list PATCH takes ("" clears the tags). */
json_object *ah_cli_tag_list(struct ah_cli *c, const char *csv)
{
	json_object *list = json_object_new_array();
	char *s = ah_strdup(c->a, csv), *save = NULL;
	for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		t += strspn(t, " ");
		if (*t)
			json_object_array_add(list, json_object_new_string(t));
	}
	return list;
}

static int run_update(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	json_object *body = ah_cli_obj(c);
	const struct ah_cli_files_opts *o = a->opts;
	const char *d = o->description, *t = o->tags, *n = o->name;
	if (d)
		json_object_object_add(body, "description", json_object_new_string(d));
	if (t)
		json_object_object_add(body, "tags", ah_cli_tag_list(c, t));
	if (n)
		json_object_object_add(body, "filename", json_object_new_string(n));
	if (!json_object_object_length(body))
		return ah_cli_usage(err, "files update: nothing to change (see agenthost files update --help)");
	int rc = ah_cli_send(c, "PATCH", file_path(c, a->pos[0]), body, &r, err);
	if (!rc)
		ah_cli_show_file(c, r.body, NULL);
	return rc;
}

static int run_delete(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	if (!((const struct ah_cli_files_opts *)a->opts)->yes) {
		if (!c->tty_in)
			return ah_cli_usage(err, "files delete: not on a terminal; confirm with --yes");
		if (!ah_cli_confirm(c, ah_sprintf(c->a, "Delete file %s (and detach it from every agent)?", a->pos[0])))
			return ah_cli_usage(err, "not deleted");
	}
	int rc = ah_cli_send(c, "DELETE", file_path(c, a->pos[0]), NULL, &r, err);
	if (!rc)
		ah_cli_note(c, "Deleted %s", a->pos[0]);
	return rc;
}

static int run_usage(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	(void)a;
	int rc = ah_cli_get(c, "/files/usage", &r, err);
	if (!rc)
		ah_cli_show(c, r.body, usage_cols);
	return rc;
}

#define O struct ah_cli_files_opts
const struct ah_cli_cmd ah_cli_files_cmds[] = {
	{"files list", NULL, "list your files", 0, 0, false, run_list,
	 {AH_CLI_PAGING_OPTS(O, page), AH_OPT_STRING("scope", 0, "user|agent|session", O, scope, "only files of this scope"),
	  AH_OPT_STRING("tags", 0, "A,B", O, tags, "only files with all of these tags"),
	  AH_OPT_STRING("search", 0, "TEXT", O, search, "only files whose name or description contains TEXT")},
	 sizeof(O)},
	{"files upload", "PATH", "upload a file (over 10 MB: a presigned upload, streamed)", 1, 1, false,
	 ah_cli_files_upload,
	 {AH_OPT_STRING("description", 'd', "TEXT", O, description, "what the file is"),
	  AH_OPT_STRING("tags", 0, "A,B", O, tags, "comma-separated tags"),
	  AH_OPT_STRING("agent", 0, "SLUG", O, agent, "upload into this agent's scope"),
	  AH_OPT_STRING("content-type", 0, "TYPE", O, content_type, "the media type (default: from the extension)")},
	 sizeof(O)},
	{"files get", "ID", "show one file's record", 1, 1, false, run_get, {{0}}},
	{"files download", "ID", "download a file (default: the server's filename, never overwritten)", 1, 1,
	 false, ah_cli_files_download,
	 {AH_OPT_STRING("output", 'o', "PATH|DIR|-", O, output,
	                "write here instead (a directory: the filename in it; -: stdout)"),
	  AH_OPT_BOOL("force", 'f', O, force, "overwrite an existing file")},
	 sizeof(O)},
	{"files update", "ID", "change a file's description, tags or name", 1, 1, false, run_update,
	 {AH_OPT_STRING("description", 'd', "TEXT", O, description, "a new description"),
	  AH_OPT_STRING("tags", 0, "A,B", O, tags, "new tags (\"\" clears them)"),
	  AH_OPT_STRING("name", 0, "FILENAME", O, name, "a new filename")},
	 sizeof(O)},
	{"files delete", "ID", "delete a file", 1, 1, false, run_delete,
	 {AH_OPT_BOOL("yes", 'y', O, yes, "do not ask")}, sizeof(O)},
	{"files usage", NULL, "your files' storage and quota", 0, 0, false, run_usage, {{0}}},
	{0},
};
