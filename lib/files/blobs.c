/* Blob reference counts and storage quota in MariaDB.
 *
 * Ordering: the file_blobs row lock (taken by the INSERT … ON DUPLICATE KEY
 * UPDATE of ah_blob_ref, or the SELECT … FOR UPDATE of ah_blob_unref) is held
 * while bytes are placed or removed, until the caller commits. An upload of
 * the same content as a blob being deleted waits for the deletion to commit,
 * then finds no row, creates it, and places the bytes again: it never ends up
 * with a row whose bytes were just removed. */
#include "files/files.h"

#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

static const char SQL_REF[] =
	"INSERT INTO file_blobs (sha256, size_bytes, refcount, created_at) VALUES (?, ?, 1, NOW(3))"
	" ON DUPLICATE KEY UPDATE refcount = refcount + 1";
static const char SQL_LOCK[] = "SELECT refcount FROM file_blobs WHERE sha256 = ? FOR UPDATE";
static const char SQL_DEC[] = "UPDATE file_blobs SET refcount = refcount - 1 WHERE sha256 = ?";
static const char SQL_DROP[] = "DELETE FROM file_blobs WHERE sha256 = ?";
/* One statement: the check and the addition cannot be split by another upload. */
static const char SQL_RESERVE[] =
	"UPDATE users SET storage_used_bytes = storage_used_bytes + ?"
	" WHERE id = ? AND storage_used_bytes + ? <= quota_bytes";
static const char SQL_RELEASE[] =
	"UPDATE users SET storage_used_bytes = GREATEST(storage_used_bytes - ?, 0) WHERE id = ?";

int ah_blob_ref(ah_db *db, const ah_store *s, const char *sha, long long size, const char *src,
                const char *content_type, ah_err *err)
{
	if (ah_db_exec(db, NULL, SQL_REF, "si", sha, size) != 0)
		return ah_err_set(err, AH_EFAIL, "blob ref: %s", ah_db_error(db));
	/* Placed even when the row existed: cheap when the bytes are there (a
	 * stat, or a HEAD), and it mends a blob whose bytes went missing. */
	return ah_store_put(s, sha, src, content_type, err);
}

int ah_blob_unref(ah_db *db, const ah_store *s, const char *sha, ah_err *err)
{
	ah_arena *a = ah_arena_new();
	ah_rows rows;
	int rc = ah_db_query(db, a, &rows, SQL_LOCK, "s", sha);
	if (rc != 0)
		rc = ah_err_set(err, AH_EFAIL, "blob lock: %s", ah_db_error(db));
	else if (rows.n == 0)
		rc = 0; /* already gone: nothing to give back */
	else if (ah_cell_ll(ah_cell(&rows, 0, 0)) > 1)
		rc = ah_db_exec(db, NULL, SQL_DEC, "s", sha) ? ah_err_set(err, AH_EFAIL, "blob unref") : 0;
	else if (ah_db_exec(db, NULL, SQL_DROP, "s", sha) != 0)
		rc = ah_err_set(err, AH_EFAIL, "blob drop: %s", ah_db_error(db));
	else
		rc = ah_store_remove(s, sha, err);
	ah_arena_destroy(a);
	return rc;
}

int ah_quota_reserve(ah_db *db, const char *user_id, long long bytes)
{
	unsigned long long n = 0;
	/* Nothing to reserve: an empty file always fits. (The UPDATE would
	 * change no row, and MariaDB counts changed rows, not matched ones:
	 * every empty upload was refused as over the quota.) */
	if (bytes == 0)
		return 0;
	if (ah_db_exec(db, &n, SQL_RESERVE, "isi", bytes, user_id, bytes) != 0)
		return AH_EFAIL;
	return n == 1 ? 0 : AH_EDENIED;
}

int ah_quota_release(ah_db *db, const char *user_id, long long bytes)
{
	return ah_db_exec(db, NULL, SQL_RELEASE, "is", bytes, user_id) ? AH_EFAIL : 0;
}

/* ---- blobs kept for something other than a file: images and uploaded code ---- */

/* One transaction of fn, run again (up to 8 times, jittered) when the
 * database rolled it back as a deadlock or, on a cluster, a certification
 * conflict: many agents keeping the same bytes at once (the same code
 * uploaded for each) all write that blob's one row. A retry after the bytes
 * were placed finds them there (ah_store_put takes what exists). */
static int in_tx(ah_db *db, const ah_store *s, const char *sha, long long size, const char *src,
                 const char *ct, ah_err *err, bool keep)
{
	int rc = AH_EFAIL;
	for (int tries = 0; tries < 8; tries++) {
		if (tries > 0)
			ah_sleep_jittered(10000u << (tries < 5 ? tries : 5), 10000);
		if (ah_db_begin(db) != 0)
			return ah_err_set(err, AH_EFAIL, "begin: %s", ah_db_error(db));
		rc = keep ? ah_blob_ref(db, s, sha, size, src, ct, err) : ah_blob_unref(db, s, sha, err);
		if (rc == 0 && ah_db_commit(db) != 0)
			rc = ah_err_set(err, AH_EFAIL, "commit: %s", ah_db_error(db));
		if (rc == 0)
			return 0;
		bool again = ah_db_deadlocked(db);
		ah_db_rollback(db);
		if (!again)
			break;
	}
	return rc;
}

int ah_blob_keep(ah_db *db, const ah_store *s, const char *sha, long long size, const char *src,
                 const char *content_type, ah_err *err)
{
	return in_tx(db, s, sha, size, src, content_type, err, true);
}

int ah_blob_drop(ah_db *db, const ah_store *s, const char *sha, ah_err *err)
{
	return sha && *sha ? in_tx(db, s, sha, 0, NULL, NULL, err, false) : 0;
}
