/* mounts list|get|add|update|rm: an agent's bucket mounts, a bucket (or the
 * part under a prefix) as a directory in the agent's sandboxes. Every change
 * applies at the agent's next deploy (the API flags it needs_redeploy), which
 * the commands say. */
#include "cli/cli.h"

#include <string.h>

static const struct ah_cli_col mount_list_cols[] = {
	{"id", "id", AH_COL_TEXT},
	{"bucket", "bucket_slug", AH_COL_TEXT},
	{"path", "mount_path", AH_COL_TEXT},
	{"read-only", "read_only", AH_COL_BOOL},
	{"enabled", "enabled", AH_COL_BOOL},
	{"cache", "cache_enabled", AH_COL_BOOL},
	{"prefix", "source_prefix", AH_COL_TEXT},
	{0},
};

static const struct ah_cli_col mount_cols[] = {
	{"id", "id", AH_COL_TEXT},
	{"bucket", "bucket_slug", AH_COL_TEXT},
	{"path", "mount_path", AH_COL_TEXT},
	{"prefix", "source_prefix", AH_COL_TEXT},
	{"read-only", "read_only", AH_COL_BOOL},
	{"enabled", "enabled", AH_COL_BOOL},
	{"cache", "cache_enabled", AH_COL_BOOL},
	{"cache ttl s", "cache_ttl_seconds", AH_COL_NUM},
	{"created", "created_at", AH_COL_TIME},
	{"updated", "updated_at", AH_COL_TIME},
	{0},
};

static const char *mounts_path(struct ah_cli *c, const struct ah_cli_args *a)
{
	const char *p = ah_sprintf(c->a, "/agents/%s/mounts", ah_cli_seg(c, a->pos[0]));
	return a->npos > 1 ? ah_sprintf(c->a, "%s/%s", p, ah_cli_seg(c, a->pos[1])) : p;
}

/* The options of the commands below, one struct for all (a member without a
 * row in a command's table stays unset: add's --disabled fills disable). */
struct mount_opts {
	struct ah_cli_paging page;
	const char *bucket, *path, *prefix;
	struct ah_cli_int cache_ttl;
	bool read_only, read_write, cache, no_cache, enable, disable;
};

static int run_list(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const char *q = ah_cli_paging(c, &((const struct mount_opts *)a->opts)->page);
	return ah_cli_list(c, ah_sprintf(c->a, "%s?%s", mounts_path(c, a), q), mount_list_cols, err);
}

static int run_get(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	int rc = ah_cli_get(c, mounts_path(c, a), &r, err);
	if (!rc)
		ah_cli_show(c, r.body, mount_cols);
	return rc;
}

/* A boolean property from the flag that sets it and the one that clears it
 * (a flag the command does not have is never given: add has only the flags
 * that depart from the defaults); on and off name them in the error. */
static int flag_pair(const struct ah_cli_args *a, bool yes, bool no, const char *on, const char *off,
                     const char *key, json_object *body, ah_err *err)
{
	if (yes && no)
		return ah_cli_usage(err, "%s: --%s or --%s, not both", a->cmd->words, on, off);
	if (yes || no)
		json_object_object_add(body, key, json_object_new_boolean(yes));
	return 0;
}

/* The record's fields from the options add and update share. */
static int mount_fields(const struct ah_cli_args *a, json_object *body, ah_err *err)
{
	const struct mount_opts *o = a->opts;
	const struct { const char *v, *field; } map[] = {
		{o->bucket, "bucket_slug"}, {o->path, "mount_path"}, {o->prefix, "source_prefix"},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i].v)
			json_object_object_add(body, map[i].field, json_object_new_string(map[i].v));
	bool added = !strcmp(a->cmd->words, "mounts add");
	int rc = flag_pair(a, o->read_only, o->read_write, "read-only", "read-write", "read_only", body, err);
	if (!rc)
		rc = flag_pair(a, o->enable, o->disable, "enable", added ? "disabled" : "disable", "enabled", body, err);
	if (!rc)
		rc = flag_pair(a, o->cache, o->no_cache, "cache", "no-cache", "cache_enabled", body, err);
	if (!rc && o->cache_ttl.set)
		json_object_object_add(body, "cache_ttl_seconds", json_object_new_int64(o->cache_ttl.n));
	return rc;
}

static void changed(struct ah_cli *c, const struct ah_cli_args *a, json_object *rec, const char *what)
{
	if (c->json && rec)
		ah_cli_print_json(c, rec);
	else if (rec)
		ah_cli_record(c, rec, mount_cols);
	if (!c->json)
		ah_cli_note(c, "%s; it applies at %s's next deploy", what, a->pos[0]);
}

static int send_mount(struct ah_cli *c, const struct ah_cli_args *a, const char *method, const char *done,
                      ah_err *err)
{
	struct ah_cli_resp r;
	json_object *body = ah_cli_obj(c);
	int rc = mount_fields(a, body, err);
	if (rc)
		return rc;
	if (!json_object_object_length(body))
		return ah_cli_usage(err, "%s: nothing to change (see agenthost %s --help)", a->cmd->words, a->cmd->words);
	rc = ah_cli_send(c, method, mounts_path(c, a), body, &r, err);
	if (!rc)
		changed(c, a, r.body, done);
	return rc;
}

static int run_add(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const struct mount_opts *o = a->opts;
	if (!o->bucket || !o->path)
		return ah_cli_usage(err, "mounts add: --bucket and --path are required (see agenthost mounts add --help)");
	return send_mount(c, a, "POST", "Mounted", err);
}

static int run_update(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	return send_mount(c, a, "PATCH", "Changed", err);
}

static int run_rm(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	int rc = ah_cli_send(c, "DELETE", mounts_path(c, a), NULL, &r, err);
	if (!rc && !c->json)
		ah_cli_note(c, "Removed mount %s; it applies at %s's next deploy", a->pos[1], a->pos[0]);
	return rc;
}

#define O struct mount_opts
#define PLACE_OPTS \
	AH_OPT_STRING("bucket", 'b', "BUCKET", O, bucket, "the bucket's slug (agenthost buckets list)"), \
	AH_OPT_STRING("path", 'p', "PATH", O, path, "where it appears in the sandbox, e.g. /data (absolute)"), \
	AH_OPT_STRING("prefix", 0, "PREFIX", O, prefix, "show only this part of the bucket (\"\": all of it)"), \
	AH_OPT_INT("cache-ttl", 0, "SECONDS", 1, 86400, O, cache_ttl, \
	           "how long cached files and listings are kept, 1-86400")

const struct ah_cli_cmd ah_cli_mounts_cmds[] = {
	{"mounts list", "SLUG", "list an agent's bucket mounts", 1, 1, false, run_list,
	 {AH_CLI_PAGING_OPTS(O, page)}, sizeof(O)},
	{"mounts get", "SLUG MOUNT_ID", "show one mount", 2, 2, false, run_get, {{0}}},
	{"mounts add", "SLUG", "mount a bucket into an agent's sandboxes (from its next deploy)", 1, 1, false,
	 run_add,
	 {PLACE_OPTS, AH_OPT_BOOL("read-only", 0, O, read_only, "the agent cannot write to it"),
	  AH_OPT_BOOL("cache", 0, O, cache, "rclone's file cache: faster re-reads, listings up to --cache-ttl old"),
	  AH_OPT_BOOL("disabled", 0, O, disable, "keep it without mounting it")},
	 sizeof(O)},
	{"mounts update", "SLUG MOUNT_ID", "change a mount (from the agent's next deploy)", 2, 2, false, run_update,
	 {PLACE_OPTS, AH_OPT_BOOL("read-only", 0, O, read_only, "make it read-only"),
	  AH_OPT_BOOL("read-write", 0, O, read_write, "make it writable"),
	  AH_OPT_BOOL("cache", 0, O, cache, "turn the file cache on"),
	  AH_OPT_BOOL("no-cache", 0, O, no_cache, "turn it off"),
	  AH_OPT_BOOL("enable", 0, O, enable, "mount it again"),
	  AH_OPT_BOOL("disable", 0, O, disable, "keep it without mounting it")},
	 sizeof(O)},
	{"mounts rm", "SLUG MOUNT_ID", "remove a mount (from the agent's next deploy)", 2, 2, false, run_rm, {{0}}},
	{0},
};
