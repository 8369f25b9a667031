/* The file record: its column table, look-up, deletion and the sweep of
 * expired pending uploads. */
#include "files/files.h"
#include "core/log.h"
#include "db/enums.h"
#include "core/util.h"

#include <string.h>

const char *const ah_file_scope_names[] = {[AH_SCOPE_USER] = AH_SCOPE_S_USER, [AH_SCOPE_AGENT] = AH_SCOPE_S_AGENT,
                                           [AH_SCOPE_SESSION] = AH_SCOPE_S_SESSION, [AH_SCOPE_SESSION + 1] = NULL};
const char *const ah_file_status_names[] = {[AH_FILE_PENDING] = AH_FILE_S_PENDING,
                                            [AH_FILE_CONFIRMED] = AH_FILE_S_CONFIRMED, [AH_FILE_CONFIRMED + 1] = NULL};

static const ah_col FILE_COLUMNS[] = {
	AH_COL_S("f.id", ah_file, id),
	AH_COL_S("f.user_id", ah_file, user_id),
	AH_COL_S("f.filename", ah_file, filename),
	AH_COL_I("f.size_bytes", ah_file, size, 0),
	AH_COL_S("f.content_type", ah_file, content_type),
	AH_COL_E("f.scope", ah_file, scope, ah_file_scope_names, AH_SCOPE_USER),
	AH_COL_E("f.status", ah_file, status, ah_file_status_names, AH_FILE_PENDING),
	AH_COL_S("f.description", ah_file, description),
	AH_COL_S("f.tags", ah_file, tags),
	AH_COL_S("f.sha256", ah_file, sha256),
	AH_COL_S("f.agent_id", ah_file, agent_id),
	AH_COL_S("a.slug", ah_file, agent_slug),
	AH_COL_S("f.session_id", ah_file, session_id),
	AH_COL_S("f.upload_expires_at", ah_file, upload_expires_at),
	AH_COL_B("f.uploaded", ah_file, uploaded),
	AH_COL_S("f.created_at", ah_file, created_at),
	AH_COL_S("f.updated_at", ah_file, updated_at),
};
#define NCOLS (sizeof(FILE_COLUMNS) / sizeof(FILE_COLUMNS[0]))

static const char SQL_GET[] =
	"SELECT " AH_FILE_COLS AH_FILE_FROM " WHERE f.id = ? AND f.user_id = ?";
static const char SQL_GET_LOCK[] =
	"SELECT " AH_FILE_COLS AH_FILE_FROM " WHERE f.id = ? AND f.user_id = ? FOR UPDATE";
static const char SQL_DELETE[] = "DELETE FROM files WHERE id = ?";
static const char SQL_OF_AGENT[] =
	"SELECT " AH_FILE_COLS AH_FILE_FROM " WHERE f.agent_id = ? LIMIT 500";
static const char SQL_OF_USER[] =
	"SELECT " AH_FILE_COLS AH_FILE_FROM " WHERE f.user_id = ? LIMIT 500";
static const char SQL_EXPIRED[] =
	"SELECT " AH_FILE_COLS AH_FILE_FROM
	" WHERE f.status = " AH_SQ(AH_FILE_S_PENDING)
	" AND f.upload_expires_at < NOW(3) - INTERVAL IF(f.uploaded, 3600, 0) SECOND LIMIT ?";

const ah_col *ah_file_columns(size_t *n)
{
	*n = NCOLS;
	return FILE_COLUMNS;
}

void ah_file_fill(ah_file *f, char *const *row)
{
	ah_record_fill(f, FILE_COLUMNS, NCOLS, row);
}

int ah_file_get(ah_db *db, ah_arena *a, const char *user_id, const char *id, bool lock,
                ah_file *out)
{
	ah_rows rows;
	if (ah_db_query(db, a, &rows, lock ? SQL_GET_LOCK : SQL_GET, "ss", id, user_id) != 0)
		return AH_EFAIL;
	if (rows.n != 1)
		return AH_ENOTFOUND;
	ah_file_fill(out, rows.v[0]);
	return 0;
}

/* Inside a transaction: row, attachments (cascade), blob reference, quota. */
static int delete_locked(ah_db *db, const ah_store *s, const ah_file *f, ah_err *err)
{
	unsigned long long n = 0;
	if (ah_db_exec(db, &n, SQL_DELETE, "s", f->id) != 0)
		return ah_err_set(err, AH_EFAIL, "delete file: %s", ah_db_error(db));
	if (n == 0)
		return AH_ENOTFOUND; /* a concurrent delete won */
	int rc = f->sha256 ? ah_blob_unref(db, s, f->sha256, err) : 0;
	if (rc == 0 && ah_quota_release(db, f->user_id, f->size) != 0)
		rc = ah_err_set(err, AH_EFAIL, "quota release: %s", ah_db_error(db));
	return rc;
}

int ah_file_delete(ah_db *db, const ah_store *s, ah_arena *a, const ah_file *f, ah_err *err)
{
	if (ah_db_begin(db) != 0)
		return ah_err_set(err, AH_EFAIL, "begin: %s", ah_db_error(db));
	int rc = delete_locked(db, s, f, err);
	if (rc == 0 && ah_db_commit(db) != 0)
		rc = ah_err_set(err, AH_EFAIL, "commit: %s", ah_db_error(db));
	if (rc) {
		ah_db_rollback(db);
		return rc;
	}
	/* Bytes of an upload that never became a blob: after the commit, so a
	 * failed transaction never loses them while the record stays. */
	if (f->status == AH_FILE_PENDING)
		ah_store_drop_pending(s, a, f->id);
	return 0;
}

/* Deletes each file of a query's rows; stops at the first failure. */
static int delete_rows(ah_db *db, const ah_store *s, ah_arena *a, const ah_rows *rows,
                       int *done, ah_err *err)
{
	for (size_t i = 0; i < rows->n; i++) {
		ah_file f;
		ah_file_fill(&f, rows->v[i]);
		int rc = ah_file_delete(db, s, a, &f, err);
		if (rc != 0 && rc != AH_ENOTFOUND)
			return rc;
		(*done)++;
	}
	return 0;
}

/* Deletes the files sql (…WHERE owner = ? LIMIT 500) selects, 500 at a time. */
static int delete_all(ah_db *db, const ah_store *s, ah_arena *a, const char *sql,
                      const char *owner, int *done, ah_err *err)
{
	for (;;) {
		ah_rows rows;
		if (ah_db_query(db, a, &rows, sql, "s", owner) != 0)
			return ah_err_set(err, AH_EFAIL, "files of %s: %s", owner, ah_db_error(db));
		int rc = delete_rows(db, s, a, &rows, done, err);
		if (rc || rows.n < 500)
			return rc;
	}
}

int ah_files_delete_for_agent(ah_db *db, const ah_store *s, ah_arena *a, const char *agent_id,
                              ah_err *err)
{
	int done = 0;
	return delete_all(db, s, a, SQL_OF_AGENT, agent_id, &done, err);
}

int ah_files_delete_for_user(ah_db *db, const ah_store *s, ah_arena *a, const char *user_id,
                             int *deleted, ah_err *err)
{
	*deleted = 0;
	return delete_all(db, s, a, SQL_OF_USER, user_id, deleted, err);
}

static const char SQL_IS_PENDING[] = "SELECT 1 FROM files WHERE id = ? AND status = " AH_SQ(AH_FILE_S_PENDING);

struct orphans {
	ah_db *db;
	const ah_store *s;
	ah_arena *a;
	int removed;
};

static int orphan_one(void *ud, const char *file_id)
{
	struct orphans *o = ud;
	ah_rows rows;
	if (ah_db_query(o->db, o->a, &rows, SQL_IS_PENDING, "s", file_id) != 0)
		return AH_EFAIL;
	if (rows.n == 0) {
		ah_store_drop_pending(o->s, o->a, file_id);
		o->removed++;
	}
	return 0;
}

static void sweep_orphans(ah_db *db, const ah_store *s, ah_arena *a)
{
	static int64_t last;
	ah_err err;
	int64_t now = ah_now_ms();
	if (!ah_store_is_s3(s) || now - last < 60000)
		return;
	last = now;
	struct orphans o = {db, s, a, 0};
	if (ah_store_each_pending(s, orphan_one, &o, &err) != 0)
		ah_log_warn("sweeping pending objects: %s", err.msg);
	if (o.removed)
		ah_log_info("removed %d pending object(s) of finished uploads", o.removed);
}

int ah_files_sweep_expired(ah_db *db, const ah_store *s, ah_arena *a, int max, ah_err *err)
{
	ah_rows rows;
	int done = 0;
	if (ah_db_query(db, a, &rows, SQL_EXPIRED, "i", (long long)max) != 0)
		return ah_err_set(err, AH_EFAIL, "expired uploads: %s", ah_db_error(db));
	int rc = delete_rows(db, s, a, &rows, &done, err);
	if (done)
		ah_log_info("removed %d expired pending upload(s)", done);
	sweep_orphans(db, s, a);
	return rc;
}
