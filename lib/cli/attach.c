/* agents files list|add|rm: files attached to an agent, which its sandboxes
 * see at their mount path (default /files/agent/<filename>, read-only). */
#include "cli/cli.h"

static const struct ah_cli_col attach_cols[] = {
	{"file id", "file_id", AH_COL_TEXT},
	{"filename", "filename", AH_COL_TEXT},
	{"size", "size_bytes", AH_COL_NUM},
	{"mount path", "mount_path", AH_COL_TEXT},
	{"read only", "read_only", AH_COL_BOOL},
	{"attached", "created_at", AH_COL_TIME},
	{0},
};

static const char *attach_path(struct ah_cli *c, const char *slug)
{
	return ah_sprintf(c->a, "/agents/%s/files", ah_cli_seg(c, slug));
}

struct attach_opts {
	struct ah_cli_paging page;
	const char *path;
	bool writable;
};

static int run_list(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const struct attach_opts *o = a->opts;
	const char *q = ah_cli_paging(c, &o->page);
	return ah_cli_list(c, ah_sprintf(c->a, "%s?%s", attach_path(c, a->pos[0]), q), attach_cols, err);
}

static int run_add(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const struct attach_opts *o = a->opts;
	struct ah_cli_resp r;
	json_object *body = ah_cli_obj(c);
	json_object_object_add(body, "file_id", json_object_new_string(a->pos[1]));
	if (o->path)
		json_object_object_add(body, "mount_path", json_object_new_string(o->path));
	if (o->writable)
		json_object_object_add(body, "read_only", json_object_new_boolean(0));
	int rc = ah_cli_send(c, "POST", attach_path(c, a->pos[0]), body, &r, err);
	if (rc)
		return rc;
	if (c->json)
		ah_cli_print_json(c, r.body);
	else
		ah_cli_note(c, "Attached %s to %s at %s (from its next invocation)", a->pos[1], a->pos[0],
		            ah_cli_text(c, r.body, "mount_path", AH_COL_TEXT));
	return 0;
}

static int run_rm(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	const char *path = ah_sprintf(c->a, "%s/%s", attach_path(c, a->pos[0]), ah_cli_seg(c, a->pos[1]));
	int rc = ah_cli_send(c, "DELETE", path, NULL, &r, err);
	if (!rc)
		ah_cli_note(c, "Detached %s from %s (the file itself stays; from its next invocation)", a->pos[1], a->pos[0]);
	return rc;
}

const struct ah_cli_cmd ah_cli_attach_cmds[] = {
	{"agents files list", "SLUG", "list the files attached to an agent", 1, 1, false, run_list,
	 {AH_CLI_PAGING_OPTS(struct attach_opts, page)}, sizeof(struct attach_opts)},
	{"agents files add", "SLUG FILE_ID", "attach a file to an agent", 2, 2, false, run_add,
	 {AH_OPT_STRING("path", 0, "PATH", struct attach_opts, path,
	                "where the sandbox sees it (default /files/agent/<filename>)"),
	  AH_OPT_BOOL("writable", 0, struct attach_opts, writable, "the agent may change it (default read-only)")},
	 sizeof(struct attach_opts)},
	{"agents files rm", "SLUG FILE_ID", "detach a file from an agent", 2, 2, false, run_rm, {{0}}},
	{0},
};
