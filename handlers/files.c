/* /files: the managed file records — list, read, change, delete, download,
 * usage. Uploads are file_upload.c's; attachments agent_files.c's. Bytes are
 * never served from here: a local blob goes out through nginx
 * (X-Accel-Redirect to an internal location), an S3 blob by a redirect to a
 * short-lived presigned GET, so Range, sendfile and slow clients are nginx's
 * or S3's business, not a worker's. */
#include "files_api.h"
#include "list.h"
#include "core/log.h"
#include "core/util.h"

#include <stdio.h>
#include <string.h>

static ah_store *store;

int ah_files_init(const ah_config *cfg, ah_err *err)
{
	return store ? 0 : ah_store_open(&store, cfg, err);
}

const ah_store *ah_files_store(void)
{
	return store;
}

static const char SQL_USAGE[] =
	"SELECT COUNT(*), COALESCE(SUM(size_bytes), 0) FROM files WHERE user_id = ?";
/* One text per shape (with or without scope): the search and tag filters
 * bind '%' when absent, which matches every row. Tags are stored sorted in
 * commas (",a,,b,"), so "all of these tags" is the one pattern '%,a,%,b,%'. */
#define LIST_WHERE                                                                     \
	" WHERE f.user_id = ? AND f.tags LIKE ?"                                           \
	" AND (f.filename COLLATE utf8mb4_general_ci LIKE ?"                   \
	" OR f.description COLLATE utf8mb4_general_ci LIKE ?)"
/* Newest first. Offset pages are a deferred join: the ids that pass the
 * filters first, then the page's rows; cursor pages start after the cursor's
 * (created_at, id). Without filters the count is list_counts'. */
#define LIST_ORDER " ORDER BY f.created_at DESC, f.id DESC"
#define LIST_PAGE LIST_ORDER " LIMIT ? OFFSET ?) k JOIN files f ON f.id = k.id" \
	" LEFT JOIN agents a ON a.id = f.agent_id" LIST_ORDER
#define LIST_AFTER " AND f.created_at <= ? AND (f.created_at < ? OR f.id < ?)" LIST_ORDER " LIMIT ?"
static const char SQL_LIST[] =
	"SELECT " AH_FILE_COLS " FROM (SELECT f.id FROM files f" LIST_WHERE LIST_PAGE;
static const char SQL_LIST_SCOPE[] =
	"SELECT " AH_FILE_COLS " FROM (SELECT f.id FROM files f" LIST_WHERE " AND f.scope = ?" LIST_PAGE;
/* An offset past half of the list (its filters counted), from the other end. */
#define LIST_REV " ORDER BY f.created_at, f.id LIMIT ? OFFSET ?) k JOIN files f ON f.id = k.id" \
	" LEFT JOIN agents a ON a.id = f.agent_id" LIST_ORDER
static const char SQL_LIST_REV[] =
	"SELECT " AH_FILE_COLS " FROM (SELECT f.id FROM files f" LIST_WHERE LIST_REV;
static const char SQL_LIST_SCOPE_REV[] =
	"SELECT " AH_FILE_COLS " FROM (SELECT f.id FROM files f" LIST_WHERE " AND f.scope = ?" LIST_REV;
static const char SQL_LIST_AFTER[] =
	"SELECT " AH_FILE_COLS " FROM files f FORCE INDEX (files_user_created)"
	" LEFT JOIN agents a ON a.id = f.agent_id" LIST_WHERE LIST_AFTER;
static const char SQL_LIST_SCOPE_AFTER[] =
	"SELECT " AH_FILE_COLS " FROM files f FORCE INDEX (files_user_scope)"
	" LEFT JOIN agents a ON a.id = f.agent_id" LIST_WHERE " AND f.scope = ?" LIST_AFTER;
enum { FILE_ID = 0, FILE_CREATED = 15 }; /* in AH_FILE_COLS */
static const char SQL_COUNT[] = "SELECT COUNT(*) FROM files f" LIST_WHERE;
static const char SQL_COUNT_SCOPE[] = "SELECT COUNT(*) FROM files f" LIST_WHERE " AND f.scope = ?";
/* Bumped by every change of the user's files (schema/018_file_changes.sql). */
static const char SQL_CHANGES[] = "SELECT COALESCE(MAX(n), 0) FROM file_changes WHERE user_id = ?";
static const char SQL_PATCH[] =
	"UPDATE files SET filename = ?, description = ?, tags = ?, content_type = ?,"
	" updated_at = NOW(3) WHERE id = ?";

static void add_tag(void *ud, const char *t, size_t n)
{
	json_object_array_add(ud, json_object_new_string_len(t, (int)n));
}

json_object *ah_file_json(ah_req *r, const ah_file *f)
{
	json_object *o = json_object_new_object(), *tags = json_object_new_array();
	ah_json_str(o, "file_id", f->id);
	ah_json_str(o, "filename", f->filename);
	ah_json_int(o, "size_bytes", f->size);
	ah_json_str(o, "content_type", f->content_type);
	ah_json_str(o, "scope", ah_file_scope_names[f->scope]);
	ah_json_str(o, "status", ah_file_status_names[f->status]);
	ah_json_str(o, "description", f->description);
	ah_tags_each(f->tags, add_tag, tags);
	json_object_object_add(o, "tags", tags);
	ah_json_str(o, "sha256_hash", f->sha256);
	ah_json_str(o, "agent_slug", f->agent_slug);
	ah_json_str(o, "session_id", f->session_id);
	ah_json_time(r, o, "created_at", f->created_at);
	ah_json_time(r, o, "updated_at", f->updated_at);
	return o;
}

int ah_file_load(ah_req *r, const char *id, bool lock, ah_file *out)
{
	int rc = ah_file_get(r->db, r->arena, r->user->id, id, lock, out);
	if (rc == AH_ENOTFOUND) {
		ah_reply_error(r, 404, "File not found");
		return AH_EDONE;
	}
	return rc;
}

int ah_file_reply(ah_req *r, int status, const char *id)
{
	ah_file f;
	int rc = ah_file_load(r, id, false, &f);
	return rc ? rc : ah_reply_json(r, status, ah_file_json(r, &f));
}

int ah_files_quota_reply(ah_req *r, long long wanted)
{
	ah_rows rows;
	long long used = 0;
	if (ah_db_query(r->db, r->arena, &rows, "SELECT storage_used_bytes FROM users WHERE id = ?",
	                "s", r->user->id) == 0)
		used = ah_cell_ll(ah_cell(&rows, 0, 0));
	return ah_reply_error(r, 403, ah_sprintf(r->arena,
	        "Storage quota exceeded: this upload needs %lld bytes, %lld of your %lld bytes"
	        " (plan %s) are in use", wanted, used, r->user->quota_bytes, r->user->plan));
}

int ah_storage_full_reply(ah_req *r, const char *what)
{
	ah_log_error("%s refused: the disk is full", what);
	return ah_reply_error(r, 507, "The server's storage is full; nothing was stored. Try again later");
}

void ah_files_sweep(ah_req *r)
{
	ah_err err;
	if (ah_files_sweep_expired(r->db, store, r->arena, 20, &err) != 0)
		ah_log_error("sweeping expired uploads: %s", err.msg);
}

/* "%…%" for LIKE, with LIKE's own characters escaped. */
static char *like_contains(ah_arena *a, const char *s)
{
	size_t n = strlen(s), o = 0;
	char *out = ah_alloc(a, n * 2 + 3);
	out[o++] = '%';
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%' || s[i] == '_' || s[i] == '\\')
			out[o++] = '\\';
		out[o++] = s[i];
	}
	out[o++] = '%';
	return out;
}

/* The query's filters as LIKE patterns; 422 entries recorded for bad ones. */
static void list_filters(ah_req *r, const char **scope, const char **tags, const char **search)
{
	const char *s = ah_query_get(r, "scope"), *t = ah_query_get(r, "tags"),
	           *q = ah_query_get(r, "search");
	*scope = s;
	if (s && ah_enum_find(ah_file_scope_names, s) < 0)
		ah_verr(r, "query", "scope", "Input should be 'user', 'agent' or 'session'", "enum");
	*tags = "%";
	char *norm;
	const char *why = t ? ah_tags_parse(r->arena, t, &norm) : NULL;
	if (why)
		ah_verr(r, "query", "tags", why, "value_error");
	else if (t) {
		/* ",a,,b," → "%,a,%,b,%" */
		char *p = ah_alloc(r->arena, strlen(norm) + 2), *o = p;
		*o++ = '%';
		for (const char *c = norm; *c; c++) {
			if (c[0] == ',' && c[1] == ',') {
				*o++ = ',';
				*o++ = '%';
				c++;
				continue;
			}
			*o++ = *c;
		}
		*o++ = '%';
		*tags = p;
	}
	*search = "%";
	if (q && (strlen(q) > 255 || !ah_utf8_valid(q, strlen(q))))
		ah_verr(r, "query", "search", "Search should be valid UTF-8 of at most 255 bytes",
		        "string_too_long");
	else if (q && *q)
		*search = like_contains(r->arena, q);
}

static json_object *file_row_json(ah_req *r, const ah_rows *rows, size_t i)
{
	ah_file f;
	ah_file_fill(&f, rows->v[i]);
	return ah_file_json(r, &f);
}

static int list_files(ah_req *r)
{
	const char *scope, *tags, *search;
	ah_files_sweep(r);
	/* 422 entries recorded here are answered by ah_list_keyset with the paging's. */
	list_filters(r, &scope, &tags, &search);
	bool filtered = strcmp(tags, "%") != 0 || strcmp(search, "%") != 0;
	ah_list l = {.page_sql = scope ? SQL_LIST_SCOPE : SQL_LIST,
	             .after_sql = scope ? SQL_LIST_SCOPE_AFTER : SQL_LIST_AFTER,
	             .rev_sql = scope ? SQL_LIST_SCOPE_REV : SQL_LIST_REV,
	             .count_sql = scope ? SQL_COUNT_SCOPE : SQL_COUNT, .time_col = FILE_CREATED,
	             .changes_sql = SQL_CHANGES, .id_col = FILE_ID, .to_json = file_row_json};
	if (!filtered)
		l.count_kind = scope ? ah_sprintf(r->arena, "file:%s", scope) : "file";
	const char *filters[] = {tags, search, search, scope};
	return ah_list_keyset(r, &l, r->user->id, filters, scope ? 4 : 3);
}

static int get_file(ah_req *r)
{
	return ah_file_reply(r, 200, r->params[0]);
}

/* Tags from JSON: an array of strings or one comma-separated string. */
static void field_tags(ah_req *r, json_object *o, char **out, bool *present)
{
	json_object *v;
	*present = json_object_object_get_ex(o, "tags", &v);
	*out = NULL;
	if (!*present)
		return;
	const char *csv = NULL;
	if (v && json_object_is_type(v, json_type_string)) {
		csv = json_object_get_string(v);
	} else if (v && json_object_is_type(v, json_type_array)) {
		char *joined = "";
		for (size_t i = 0; i < json_object_array_length(v); i++) {
			json_object *t = json_object_array_get_idx(v, i);
			if (!json_object_is_type(t, json_type_string) || strchr(json_object_get_string(t), ',')) {
				ah_verr(r, "body", "tags", "Tags should be strings without commas", "value_error");
				return;
			}
			joined = ah_sprintf(r->arena, "%s%s%s", joined, i ? "," : "", json_object_get_string(t));
		}
		csv = joined;
	} else if (v) {
		ah_verr(r, "body", "tags", "Tags should be a list of strings", "list_type");
		return;
	}
	const char *why = ah_tags_parse(r->arena, csv, out);
	if (why)
		ah_verr(r, "body", "tags", why, "value_error");
}

static int patch_file(ah_req *r)
{
	static const char *const fields[] = {"filename", "description", "tags", "content_type", NULL};
	ah_file f;
	json_object *o;
	const char *name, *desc, *ct;
	char *tags;
	bool has_name, has_desc, has_tags, has_ct;
	int rc = ah_file_load(r, r->params[0], false, &f);
	if (rc != 0 || (rc = ah_body_object(r, &o, fields)) != 0)
		return rc;
	ah_field_str(r, o, "filename", 0, 1, AH_FILENAME_MAX, &name, &has_name);
	if (name && ah_filename_problem(name, strlen(name)))
		ah_verr(r, "body", "filename", ah_filename_problem(name, strlen(name)), "value_error");
	ah_field_str(r, o, "description", AH_F_NULLABLE, 0, AH_DESCRIPTION_MAX, &desc, &has_desc);
	ah_field_str(r, o, "content_type", 0, 1, 255, &ct, &has_ct);
	if (ct && ah_content_type_problem(ct))
		ah_verr(r, "body", "content_type", ah_content_type_problem(ct), "value_error");
	field_tags(r, o, &tags, &has_tags);
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	if (ah_db_exec(r->db, NULL, SQL_PATCH, "sssss", has_name ? name : f.filename,
	               has_desc ? desc : f.description, has_tags ? tags : f.tags,
	               has_ct ? ct : f.content_type, f.id) != 0)
		return AH_EFAIL;
	return ah_file_reply(r, 200, f.id);
}

static int delete_file(ah_req *r)
{
	ah_file f;
	ah_err err;
	int rc = ah_file_load(r, r->params[0], false, &f);
	if (rc != 0)
		return rc;
	rc = ah_file_delete(r->db, store, r->arena, &f, &err);
	if (rc == AH_ENOTFOUND)
		return ah_reply_error(r, 404, "File not found");
	if (rc) {
		ah_log_error("deleting %s: %s", f.id, err.msg);
		return AH_EFAIL;
	}
	return ah_reply_no_content(r);
}

static int download_file(ah_req *r)
{
	ah_file f;
	ah_err err;
	char *target;
	bool redirect;
	int rc = ah_file_load(r, r->params[0], false, &f);
	if (rc != 0)
		return rc;
	if (f.status != AH_FILE_CONFIRMED || !f.sha256)
		return ah_reply_error(r, 409, "The file's upload has not been confirmed yet");
	const char *disp = ah_content_disposition(r->arena, f.filename);
	if (ah_store_download(store, r->arena, f.sha256, f.content_type, disp, &target, &redirect,
	                      &err) != 0) {
		ah_log_error("download of %s: %s", f.id, err.msg);
		return AH_EFAIL;
	}
	if (redirect) {
		ah_header(r, "Location", target);
		ah_header(r, "Cache-Control", "no-store");
		return ah_reply_raw(r, 302, NULL, NULL, 0);
	}
	ah_header(r, "Content-Disposition", disp);
	ah_header(r, "X-Accel-Redirect", target);
	return ah_reply_raw(r, 200, f.content_type, NULL, 0);
}

static int usage(ah_req *r)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, SQL_USAGE, "s", r->user->id) != 0)
		return AH_EFAIL;
	long long used = ah_cell_ll(ah_cell(&rows, 0, 1)), quota = r->user->quota_bytes;
	json_object *o = json_object_new_object();
	ah_json_int(o, "total_files", ah_cell_ll(ah_cell(&rows, 0, 0)));
	ah_json_int(o, "total_size_bytes", used);
	ah_json_int(o, "quota_bytes", quota);
	double pct = quota > 0 ? (double)used * 100.0 / (double)quota : 0.0;
	json_object_object_add(o, "quota_used_percent", json_object_new_double(((long long)(pct * 100 + 0.5)) / 100.0));
	ah_json_str(o, "plan", r->user->plan);
	return ah_reply_json(r, 200, o);
}

const ah_route ah_files_routes[] = {
	{"GET", "/files", list_files, 0, 0, NULL},
	{"GET", "/files/usage", usage, 0, 0, NULL},
	{"GET", "/files/{id}", get_file, 0, 0, NULL},
	{"PATCH", "/files/{id}", patch_file, 0, 0, NULL},
	{"DELETE", "/files/{id}", delete_file, 0, 0, NULL},
	{"GET", "/files/{id}/download", download_file, 0, 0, NULL},
	{NULL, NULL, NULL, 0, 0, NULL},
};
