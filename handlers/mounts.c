/* /agents/{slug}/mounts: the caller's buckets as directories of the agent's
 * sandboxes. Rows only: the runner applies the enabled ones at the next
 * deploy (lib/runner/mounts.c), so every change flags the agent
 * needs_redeploy. */
#include "agents.h"
#include "buckets_api.h"
#include "list.h"
#include "routes.h"
#include "validate.h"
#include "core/util.h"
#include "db/record.h"

#include <string.h>

#define MOUNT_PATH_MAX 255
#define PREFIX_MAX 1024
#define CACHE_TTL_DEFAULT 60

typedef struct ah_mount {
	const char *id, *bucket_slug, *mount_path, *source_prefix;
	bool read_only, enabled, cache_enabled;
	long long cache_ttl_seconds;
	const char *created_at, *updated_at;
} ah_mount;

#define MOUNT_COLS                                                                   \
	"m.id, b.slug, m.mount_path, m.source_prefix, m.read_only, m.enabled,"           \
	" m.cache_enabled, m.cache_ttl_seconds, m.created_at, m.updated_at"
static const ah_col MOUNT_COLUMNS[] = {
	AH_COL_S("m.id", ah_mount, id),
	AH_COL_S("b.slug", ah_mount, bucket_slug),
	AH_COL_S("m.mount_path", ah_mount, mount_path),
	AH_COL_S("m.source_prefix", ah_mount, source_prefix),
	AH_COL_B("m.read_only", ah_mount, read_only),
	AH_COL_B("m.enabled", ah_mount, enabled),
	AH_COL_B("m.cache_enabled", ah_mount, cache_enabled),
	AH_COL_I("m.cache_ttl_seconds", ah_mount, cache_ttl_seconds, CACHE_TTL_DEFAULT),
	AH_COL_S("m.created_at", ah_mount, created_at),
	AH_COL_S("m.updated_at", ah_mount, updated_at),
};
#define MOUNT_NCOLS (sizeof(MOUNT_COLUMNS) / sizeof(MOUNT_COLUMNS[0]))

#define MOUNT_FROM " FROM mounts m JOIN buckets b ON b.id = m.bucket_id"
static const char SQL_LIST[] =
	"SELECT " MOUNT_COLS MOUNT_FROM " WHERE m.agent_id = ?"
	" ORDER BY m.created_at, m.id LIMIT ? OFFSET ?";
static const char SQL_COUNT[] = "SELECT COUNT(*) FROM mounts WHERE agent_id = ?";
static const char SQL_GET[] = "SELECT " MOUNT_COLS MOUNT_FROM " WHERE m.agent_id = ? AND m.id = ?";
static const char SQL_PATHS[] = "SELECT id, mount_path FROM mounts WHERE agent_id = ?";
static const char SQL_INSERT[] =
	"INSERT INTO mounts (id, agent_id, bucket_id, mount_path, source_prefix, read_only, enabled,"
	" cache_enabled, cache_ttl_seconds, created_at, updated_at)"
	" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NOW(3), NOW(3))";
static const char SQL_UPDATE[] =
	"UPDATE mounts SET bucket_id = ?, mount_path = ?, source_prefix = ?, read_only = ?,"
	" enabled = ?, cache_enabled = ?, cache_ttl_seconds = ?, updated_at = NOW(3) WHERE id = ?";
static const char SQL_DELETE[] = "DELETE FROM mounts WHERE id = ?";
static const char SQL_FLAG[] =
	"UPDATE agents SET needs_redeploy = 1, updated_at = NOW(3) WHERE id = ?";

static const ah_mount *parse(ah_req *r, char *const *row)
{
	static bool checked;
	AH_RECORD_CHECK(checked, MOUNT_COLUMNS, MOUNT_NCOLS, MOUNT_COLS);
	ah_mount *m = ah_alloc(r->arena, sizeof(*m));
	ah_record_fill(m, MOUNT_COLUMNS, MOUNT_NCOLS, row);
	return m;
}

static json_object *mount_json(ah_req *r, const ah_mount *m)
{
	json_object *o = json_object_new_object();
	ah_json_str(o, "id", m->id);
	ah_json_str(o, "bucket_slug", m->bucket_slug);
	ah_json_str(o, "mount_path", m->mount_path);
	ah_json_str(o, "source_prefix", m->source_prefix);
	ah_json_bool(o, "read_only", m->read_only);
	ah_json_bool(o, "enabled", m->enabled);
	ah_json_bool(o, "cache_enabled", m->cache_enabled);
	ah_json_int(o, "cache_ttl_seconds", m->cache_ttl_seconds);
	ah_json_time(r, o, "created_at", m->created_at);
	ah_json_time(r, o, "updated_at", m->updated_at);
	return o;
}

static json_object *mount_row_json(ah_req *r, const ah_rows *rows, size_t i)
{
	return mount_json(r, parse(r, rows->v[i]));
}

/* The agent's mount with this id, or a 404 written (AH_EDONE). */
static int load(ah_req *r, const ah_agent *a, const char *id, const ah_mount **out)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, SQL_GET, "ss", a->id, id) != 0)
		return AH_EFAIL;
	if (rows.n == 0)
		return ah_reply_error(r, 404, "Mount not found");
	*out = parse(r, rows.v[0]);
	return 0;
}

/* ---- input ---- */

typedef struct mount_in {
	const char *bucket_slug, *mount_path, *source_prefix;
	bool read_only, enabled, cache_enabled;
	long long ttl;
	bool has_bucket, has_path, has_prefix, has_ro, has_enabled, has_cache, has_ttl;
} mount_in;

static const char *const MOUNT_FIELDS[] = {"bucket_slug", "mount_path", "source_prefix",
                                           "read_only", "enabled", "cache_enabled",
                                           "cache_ttl_seconds", NULL};

static void check_fields(ah_req *r, json_object *o, mount_in *in, bool create)
{
	unsigned req = create ? AH_F_REQUIRED : 0;
	const char *why;
	ah_field_str(r, o, "bucket_slug", req, 1, 63, &in->bucket_slug, &in->has_bucket);
	if (ah_field_str(r, o, "mount_path", req, 1, MOUNT_PATH_MAX, &in->mount_path, &in->has_path) == 0 &&
	    in->mount_path && (why = ah_bucket_mount_path_problem(in->mount_path)))
		ah_verr(r, "body", "mount_path", why, "value_error");
	if (ah_field_str(r, o, "source_prefix", AH_F_NULLABLE, 0, PREFIX_MAX, &in->source_prefix,
	                 &in->has_prefix) == 0 && in->source_prefix &&
	    (why = ah_source_prefix_problem(in->source_prefix)))
		ah_verr(r, "body", "source_prefix", why, "value_error");
	ah_field_bool(r, o, "read_only", 0, &in->read_only, &in->has_ro);
	ah_field_bool(r, o, "enabled", 0, &in->enabled, &in->has_enabled);
	ah_field_bool(r, o, "cache_enabled", 0, &in->cache_enabled, &in->has_cache);
	ah_field_int(r, o, "cache_ttl_seconds", 0, 1, 86400, &in->ttl, &in->has_ttl);
}

/* 409 when path and another mount (not self_id) of the agent nest. */
static int check_nesting(ah_req *r, const ah_agent *a, const char *path, const char *self_id)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, SQL_PATHS, "s", a->id) != 0)
		return AH_EFAIL;
	for (size_t i = 0; i < rows.n; i++) {
		const char *other = rows.v[i][1];
		if (self_id && strcmp(rows.v[i][0], self_id) == 0)
			continue;
		if (ah_path_within(path, other) || ah_path_within(other, path))
			return ah_reply_error(r, 409, ah_sprintf(r->arena, "Mount path '%s' overlaps the "
			                      "agent's mount at '%s'; mounts may not be nested", path, other));
	}
	return 0;
}

/* The caller's bucket by slug, or a 404 written: another user's is unknown. */
static int find_bucket(ah_req *r, const char *slug, const ah_bucket **out)
{
	int rc = ah_bucket_find(r, slug, out);
	return rc == AH_ENOTFOUND
	       ? ah_reply_error(r, 404, ah_sprintf(r->arena, "Bucket '%s' not found", slug)) : rc;
}

/* ---- handlers ---- */

static int list_mounts(ah_req *r)
{
	const ah_agent *a;
	int rc = ah_agent_load(r, &a);
	return rc ? rc : ah_list_reply(r, SQL_COUNT, SQL_LIST, a->id, mount_row_json);
}

/* The row written (inserted when insert) and the agent flagged, in one
 * transaction. */
static int write_and_flag(ah_req *r, const ah_agent *a, const char *id, const char *bucket_id,
                          const mount_in *in, bool insert)
{
	int rc = ah_db_begin(r->db);
	if (rc != 0)
		return rc;
	long long ro = in->read_only, on = in->enabled, cache = in->cache_enabled;
	if (insert)
		rc = ah_db_exec(r->db, NULL, SQL_INSERT, "sssssiiii", id, a->id, bucket_id,
		                in->mount_path, in->source_prefix, ro, on, cache, in->ttl);
	else
		rc = ah_db_exec(r->db, NULL, SQL_UPDATE, "sssiiiis", bucket_id, in->mount_path,
		                in->source_prefix, ro, on, cache, in->ttl, id);
	if (rc == 0)
		rc = ah_db_exec(r->db, NULL, SQL_FLAG, "s", a->id);
	if (rc == 0)
		rc = ah_db_commit(r->db);
	if (rc != 0)
		ah_db_rollback(r->db);
	return rc;
}

static int create_mount(ah_req *r)
{
	const ah_agent *a;
	const ah_bucket *b;
	json_object *o;
	mount_in in = {.enabled = true, .ttl = CACHE_TTL_DEFAULT};
	int rc = ah_agent_load(r, &a);
	if (rc != 0 || (rc = ah_body_object(r, &o, MOUNT_FIELDS)) != 0)
		return rc;
	check_fields(r, o, &in, true);
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	if (!in.source_prefix)
		in.source_prefix = "";
	if ((rc = find_bucket(r, in.bucket_slug, &b)) != 0 ||
	    (rc = check_nesting(r, a, in.mount_path, NULL)) != 0)
		return rc;
	const char *id = ah_id_new(r->arena, "mnt");
	if ((rc = write_and_flag(r, a, id, b->id, &in, true)) != 0)
		return rc;
	const ah_mount *m;
	return load(r, a, id, &m) ? AH_EFAIL : ah_reply_json(r, 201, mount_json(r, m));
}

static int get_mount(ah_req *r)
{
	const ah_agent *a;
	const ah_mount *m;
	int rc = ah_agent_load(r, &a);
	if (rc != 0 || (rc = load(r, a, r->params[1], &m)) != 0)
		return rc;
	return ah_reply_json(r, 200, mount_json(r, m));
}

static int patch_mount(ah_req *r)
{
	const ah_agent *a;
	const ah_mount *m;
	const ah_bucket *b;
	json_object *o;
	mount_in in = {0};
	int rc = ah_agent_load(r, &a);
	if (rc != 0 || (rc = load(r, a, r->params[1], &m)) != 0 || (rc = ah_body_object(r, &o, MOUNT_FIELDS)) != 0)
		return rc;
	check_fields(r, o, &in, false);
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	mount_in v = {
		.mount_path = in.has_path ? in.mount_path : m->mount_path,
		.source_prefix = in.has_prefix && in.source_prefix ? in.source_prefix
		                 : in.has_prefix ? "" : m->source_prefix,
		.read_only = in.has_ro ? in.read_only : m->read_only,
		.enabled = in.has_enabled ? in.enabled : m->enabled,
		.cache_enabled = in.has_cache ? in.cache_enabled : m->cache_enabled,
		.ttl = in.has_ttl ? in.ttl : m->cache_ttl_seconds,
	};
	if ((rc = find_bucket(r, in.has_bucket ? in.bucket_slug : m->bucket_slug, &b)) != 0 ||
	    (rc = check_nesting(r, a, v.mount_path, m->id)) != 0 ||
	    (rc = write_and_flag(r, a, m->id, b->id, &v, false)) != 0)
		return rc;
	return load(r, a, m->id, &m) ? AH_EFAIL : ah_reply_json(r, 200, mount_json(r, m));
}

static int delete_mount(ah_req *r)
{
	const ah_agent *a;
	const ah_mount *m;
	int rc = ah_agent_load(r, &a);
	if (rc != 0 || (rc = load(r, a, r->params[1], &m)) != 0)
		return rc;
	if (ah_db_begin(r->db) != 0)
		return AH_EFAIL;
	if (ah_db_exec(r->db, NULL, SQL_DELETE, "s", m->id) != 0 ||
	    ah_db_exec(r->db, NULL, SQL_FLAG, "s", a->id) != 0 || ah_db_commit(r->db) != 0) {
		ah_db_rollback(r->db);
		return AH_EFAIL;
	}
	return ah_reply_no_content(r);
}

const ah_route ah_mounts_routes[] = {
	{"GET", "/agents/{slug}/mounts", list_mounts, 0, 0, AH_AGENT_SCOPE},
	{"POST", "/agents/{slug}/mounts", create_mount, 0, 0, AH_AGENT_SCOPE},
	{"GET", "/agents/{slug}/mounts/{id}", get_mount, 0, 0, AH_AGENT_SCOPE},
	{"PATCH", "/agents/{slug}/mounts/{id}", patch_mount, 0, 0, AH_AGENT_SCOPE},
	{"DELETE", "/agents/{slug}/mounts/{id}", delete_mount, 0, 0, AH_AGENT_SCOPE},
	{NULL, NULL, NULL, 0, 0},
};
