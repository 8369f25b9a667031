/* Managed files of an invocation, on the API's side: what the run request
 * carries (attachments, the session's earlier outputs, the quota left and the
 * call's caps) and what becomes of the bytes the runner copied out afterwards
 * (session files of that session, writable attachments saved back), each
 * counted against the quota like an upload. The first that cannot be kept
 * ends it: the rest are dropped and the result's files_error says so. The
 * runner's half is lib/runner/run_files.c and run_collect.c. */
#include "invoke_files.h"
#include "files_api.h"
#include "core/log.h"
#include "core/util.h"
#include "db/enums.h"

#include <string.h>
#include <unistd.h>

static const char SQL_SESSION_FILE[] =
	"SELECT " AH_FILE_COLS AH_FILE_FROM " WHERE f.agent_id = ? AND f.session_id = ?"
	" AND f.filename = ? AND f.scope = 'session' FOR UPDATE";
static const char SQL_REPLACE[] =
	"UPDATE files SET sha256 = ?, size_bytes = ?, updated_at = NOW(3) WHERE id = ?";
static const char SQL_INSERT[] =
	"INSERT INTO files (id, user_id, filename, size_bytes, content_type, scope, status, tags,"
	" sha256, agent_id, session_id, created_at, updated_at)"
	" VALUES (?, ?, ?, ?, ?, " AH_SQ(AH_SCOPE_S_SESSION) ", " AH_SQ(AH_FILE_S_CONFIRMED) ", '', ?, ?, ?, NOW(3), NOW(3))";

static json_object *entry(const char *k1, const char *v1, const char *k2, const char *v2)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, k1, json_object_new_string(v1 ? v1 : ""));
	json_object_object_add(o, k2, json_object_new_string(v2 ? v2 : ""));
	return o;
}

void ah_invoke_files_request(ah_req *r, char ***rows, size_t n, json_object *q)
{
	long long left = 0;
	json_object *files = json_object_new_object(), *al = json_object_new_array(),
	            *sl = json_object_new_array();
	for (size_t i = 0; i < n; i++) {
		char **v = rows[i] + 1, kind = rows[i][0][0];
		json_object *e;
		if (kind == 'q') {
			left = ah_cell_ll(v[0]);
		} else if (kind == 'a') {
			e = entry("file_id", v[0], "sha", v[1]);
			json_object_object_add(e, "path", json_object_new_string(v[2]));
			json_object_object_add(e, "ro", json_object_new_boolean(ah_cell_ll(v[3]) != 0));
			json_object_array_add(al, e);
		} else {
			e = entry("name", v[0], "sha", v[1]);
			json_object_object_add(e, "size", json_object_new_int64(ah_cell_ll(v[2])));
			json_object_array_add(sl, e);
		}
	}
	json_object_object_add(files, "attach", al);
	json_object_object_add(files, "session", sl);
	json_object_object_add(files, "collect_max", json_object_new_int64(left > 0 ? left : 0));
	/* The call's caps (the runner also caps the bytes by the sandbox's disk). */
	const ah_invoke_settings *set = &ah_settings_of(r->cfg)->invoke;
	json_object_object_add(files, "max_bytes", json_object_new_int64(set->output_max_bytes));
	json_object_object_add(files, "max_files", json_object_new_int64(set->output_max_files));
	json_object_object_add(q, "files", files);
}

/* A few common types by extension; the rest is application/octet-stream. */
static const char *guess_type(const char *name)
{
	static const char *const map[][2] = {
		{".txt", "text/plain"}, {".md", "text/markdown"}, {".json", "application/json"},
		{".csv", "text/csv"}, {".html", "text/html"}, {".png", "image/png"},
		{".jpg", "image/jpeg"}, {".pdf", "application/pdf"},
	};
	const char *dot = strrchr(name, '.');
	for (size_t i = 0; dot && i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(dot, map[i][0]) == 0)
			return map[i][1];
	return "application/octet-stream";
}

/* The runner's copy, if it is where runners put copies (files_dir/tmp/). */
static const char *tmp_of(ah_req *r, json_object *e)
{
	json_object *v;
	const char *p = json_object_object_get_ex(e, "tmp", &v) ? json_object_get_string(v) : NULL;
	const char *dir = ah_sprintf(r->arena, "%s/tmp/", ah_store_dir(ah_files_store()));
	return p && strncmp(p, dir, strlen(dir)) == 0 && !strstr(p, "/..") ? p : NULL;
}

static const char *get_s(json_object *e, const char *k)
{
	json_object *v;
	return json_object_object_get_ex(e, k, &v) ? json_object_get_string(v) : NULL;
}

/* New bytes for an existing record (locked by the caller's transaction), or
 * a new session record when old is NULL. Quota: the difference. */
static int store_bytes(ah_req *r, const ah_file *old, const char *id, const char *name,
                       const char *sha, long long size, const char *tmp, const char *agent_id,
                       const char *session_id)
{
	ah_err err;
	long long delta = size - (old ? old->size : 0);
	if (delta > 0 && ah_quota_reserve(r->db, r->user->id, delta) != 0)
		return AH_EDENIED;
	int rc = ah_blob_ref(r->db, ah_files_store(), sha, size, tmp, old ? old->content_type : guess_type(name), &err);
	if (rc == 0 && old)
		rc = ah_db_exec(r->db, NULL, SQL_REPLACE, "sis", sha, size, id) ? AH_EFAIL
		     : old->sha256 ? ah_blob_unref(r->db, ah_files_store(), old->sha256, &err) : 0;
	else if (rc == 0)
		rc = ah_db_exec(r->db, NULL, SQL_INSERT, "sssissss", id, r->user->id, name, size,
		                guess_type(name), sha, agent_id, session_id) ? AH_EFAIL : 0;
	if (rc == 0 && delta < 0)
		rc = ah_quota_release(r->db, r->user->id, -delta);
	if (rc && delta > 0)
		ah_quota_release(r->db, r->user->id, delta);
	return rc;
}

/* Why a file was not kept, for the result's files_error. */
static const char *why(ah_req *r, int rc, const char *what)
{
	return rc == AH_EDENIED ? ah_sprintf(r->arena, "storage quota exceeded: %s not kept", what)
	                        : ah_sprintf(r->arena, "%s could not be recorded: not kept", what);
}

/* One session output: a new record, or new bytes for the session's file of
 * that name; NULL and *error when it is not kept. */
static const char *session_out(ah_req *r, const ah_agent *a, const char *sid, json_object *e,
                               long long *size, const char **error)
{
	const char *name = get_s(e, "name"), *sha = get_s(e, "sha"), *tmp = tmp_of(r, e);
	json_object *sz;
	*size = json_object_object_get_ex(e, "size", &sz) ? json_object_get_int64(sz) : -1;
	if (!name || !sha || !tmp || *size < 0 || ah_filename_problem(name, strlen(name))) {
		*error = why(r, AH_EFAIL, name && !ah_filename_problem(name, strlen(name))
		                          ? ah_sprintf(r->arena, "%s and the files after it", name)
		                          : "a session file and the files after it");
		if (tmp)
			unlink(tmp);
		return NULL;
	}
	ah_rows rows;
	ah_file old;
	const char *id = NULL;
	int rc = ah_db_begin(r->db) ? AH_EFAIL
	         : ah_db_query(r->db, r->arena, &rows, SQL_SESSION_FILE, "sss", a->id, sid, name);
	if (rc == 0) {
		if (rows.n)
			ah_file_fill(&old, rows.v[0]);
		id = rows.n ? old.id : ah_id_new(r->arena, "fil");
		rc = store_bytes(r, rows.n ? &old : NULL, id, name, sha, *size, tmp, a->id, sid);
	}
	if (rc == 0 && ah_db_commit(r->db) == 0)
		return id;
	ah_db_rollback(r->db);
	unlink(tmp);
	ah_log_warn("session file %s of %s not kept (%s)", name, sid,
	            rc == AH_EDENIED ? "quota" : *ah_db_error(r->db) ? ah_db_error(r->db) : "error");
	*error = why(r, rc, ah_sprintf(r->arena, "%s and the files after it", name));
	return NULL;
}

/* One writable attachment saved back, if the file is still the user's; else
 * *error, but not when the file is gone (deleted during the call). */
static void attach_out(ah_req *r, json_object *e, const char **error)
{
	const char *id = get_s(e, "file_id"), *sha = get_s(e, "sha"), *tmp = tmp_of(r, e);
	json_object *sz;
	long long size = json_object_object_get_ex(e, "size", &sz) ? json_object_get_int64(sz) : -1;
	ah_file old;
	int rc = !id || !sha || !tmp || size < 0 ? AH_EINVALID : ah_db_begin(r->db) ? AH_EFAIL : 0;
	if (rc == 0 && (rc = ah_file_get(r->db, r->arena, r->user->id, id, true, &old)) == 0)
		rc = store_bytes(r, &old, id, old.filename, sha, size, tmp, NULL, NULL);
	if (rc == 0 && ah_db_commit(r->db) == 0)
		return;
	ah_db_rollback(r->db);
	if (tmp)
		unlink(tmp);
	ah_log_warn("attachment %s not saved back (%d)", id ? id : "?", rc);
	if (rc != AH_ENOTFOUND)
		*error = why(r, rc, ah_sprintf(r->arena, "the changes of attachment %s and the files after"
		                               " it", id ? id : "?"));
}

/* The runner's copies of the files not taken after a failure. */
static void drop(ah_req *r, json_object *list, size_t from)
{
	for (size_t i = from; list && i < json_object_array_length(list); i++) {
		const char *tmp = tmp_of(r, json_object_array_get_idx(list, i));
		if (tmp)
			unlink(tmp);
	}
}

json_object *ah_invoke_files_record(ah_req *r, const ah_agent *a, const char *session_id,
                                    json_object *ans, const char **error)
{
	json_object *fo, *ses = NULL, *att = NULL, *out = json_object_new_array(), *v;
	const char *mine = NULL;
	*error = NULL;
	if (ans && json_object_object_get_ex(ans, "files_out", &fo)) {
		json_object_object_get_ex(fo, "session", &ses);
		json_object_object_get_ex(fo, "attach", &att);
		if (json_object_object_get_ex(fo, "error", &v) && json_object_is_type(v, json_type_string))
			*error = ah_strdup(r->arena, json_object_get_string(v));
	}
	size_t i = 0;
	for (; !mine && att && i < json_object_array_length(att); i++)
		attach_out(r, json_object_array_get_idx(att, i), &mine);
	drop(r, att, i);
	for (i = 0; !mine && ses && i < json_object_array_length(ses); i++) {
		json_object *e = json_object_array_get_idx(ses, i);
		long long size;
		const char *id = session_out(r, a, session_id, e, &size, &mine);
		if (!id)
			continue;
		json_object *o = json_object_new_object();
		ah_json_str(o, "file_id", id);
		ah_json_str(o, "filename", get_s(e, "name"));
		ah_json_int(o, "size_bytes", size);
		json_object_array_add(out, o);
	}
	drop(r, ses, i);
	/* An earlier file than the one the runner stopped at. */
	if (mine)
		*error = mine;
	return ah_json_own(r, out);
}
