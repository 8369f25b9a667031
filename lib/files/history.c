/* History blobs: prompts and responses too large for an InnoDB row kept in the
 * file store instead, content-addressed like managed files and refcounted in
 * file_blobs with them. history_blobs holds one reference per (invocation,
 * blob); its rows are written before their invocation's row and outlive it
 * (retention, a cascade from the agent or the user fire nothing that could
 * reach the store), so a sweep gives back the references of rows whose
 * invocation is gone. */
#include "files/files.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char SQL_HOLD[] =
	"INSERT INTO history_blobs (invocation_id, sha256, agent_id, created_at)"
	" VALUES (?, ?, ?, NOW(3))";
/* A reference is orphaned when its invocation is gone: at once when its agent
 * is gone too (nothing can still record it), else after ten minutes (its
 * invocation row may be about to be written). */
static const char SQL_ORPHANS[] =
	"SELECT hb.invocation_id, hb.sha256 FROM history_blobs hb"
	" WHERE (? IS NULL OR hb.agent_id = ?)"
	" AND NOT EXISTS (SELECT 1 FROM invocations i WHERE i.id = hb.invocation_id)"
	" AND (NOT EXISTS (SELECT 1 FROM agents a WHERE a.id = hb.agent_id)"
	"      OR hb.created_at < NOW(3) - INTERVAL 10 MINUTE)"
	" LIMIT ?";
static const char SQL_RELEASE[] = "DELETE FROM history_blobs WHERE invocation_id = ? AND sha256 = ?";

static int write_tmp(const ah_store *s, ah_arena *a, const void *bytes, size_t len, char **path,
                     ah_err *err)
{
	int fd;
	if (ah_store_tmp(s, a, &fd, path, err) != 0)
		return AH_EFAIL;
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, (const char *)bytes + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ah_err_set(err, AH_EFAIL, "writing %s: %s", *path, strerror(errno));
			close(fd);
			unlink(*path);
			return AH_EFAIL;
		}
		off += (size_t)n;
	}
	if (close(fd) != 0) {
		unlink(*path);
		return ah_err_set(err, AH_EFAIL, "closing %s: %s", *path, strerror(errno));
	}
	return 0;
}

int ah_history_blob_put(ah_db *db, const ah_store *s, ah_arena *a, const char *invocation_id,
                        const char *agent_id, const void *bytes, size_t len, char sha[65],
                        ah_err *err)
{
	char *path;
	long long size;
	if (write_tmp(s, a, bytes, len, &path, err) != 0)
		return AH_EFAIL;
	if (ah_file_sha256(path, sha, &size, err) != 0) {
		unlink(path);
		return AH_EFAIL;
	}
	if (ah_db_begin(db) != 0) {
		unlink(path);
		return ah_err_set(err, AH_EFAIL, "history blob: %s", ah_db_error(db));
	}
	/* The reference first: should the blob's bytes fail to land, the rollback
	 * takes both back. */
	int rc = ah_db_exec(db, NULL, SQL_HOLD, "sss", invocation_id, sha, agent_id);
	if (rc == 0)
		rc = ah_blob_ref(db, s, sha, size, path, "application/octet-stream", err);
	else
		ah_err_set(err, rc, "history blob reference: %s", ah_db_error(db));
	if (rc == 0 && ah_db_commit(db) != 0)
		rc = ah_err_set(err, AH_EFAIL, "history blob commit: %s", ah_db_error(db));
	if (rc != 0)
		ah_db_rollback(db);
	unlink(path); /* consumed by ah_store_put when placed; else ours to remove */
	return rc;
}

char *ah_history_blob_get(const ah_store *s, ah_arena *a, const char *sha, size_t *len, ah_err *err)
{
	char *buf = NULL;
	int fd;
	struct stat st;
	if (ah_store_open_blob(s, a, sha, &fd, err) != 0)
		return NULL;
	if (fstat(fd, &st) == 0) {
		buf = ah_alloc(a, (size_t)st.st_size + 1);
		size_t got = 0;
		while (got < (size_t)st.st_size) {
			ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		buf[got] = '\0';
		*len = got;
		if (got != (size_t)st.st_size)
			buf = NULL, ah_err_set(err, AH_EFAIL, "short read of history blob %s", sha);
	} else {
		ah_err_set(err, AH_EFAIL, "history blob %s: %s", sha, strerror(errno));
	}
	close(fd);
	return buf;
}

/* One batch of at most max references; *released counts those released. */
static int sweep_batch(ah_db *db, const ah_store *s, ah_arena *a, const char *agent_id, int max,
                       int *released, ah_err *err)
{
	ah_rows rows;
	*released = 0;
	if (ah_db_query(db, a, &rows, SQL_ORPHANS, "ssi", agent_id, agent_id, (long long)max) != 0)
		return ah_err_set(err, AH_EFAIL, "history blobs: %s", ah_db_error(db));
	for (size_t i = 0; i < rows.n; i++) {
		const char *inv = rows.v[i][0], *sha = rows.v[i][1];
		unsigned long long n = 0;
		/* The row's delete decides who releases it: two sweepers never unref twice. */
		if (ah_db_begin(db) != 0 || ah_db_exec(db, &n, SQL_RELEASE, "ss", inv, sha) != 0 ||
		    (n == 1 && ah_blob_unref(db, s, sha, err) != 0) || ah_db_commit(db) != 0) {
			ah_db_rollback(db);
			return ah_err_set(err, AH_EFAIL, "releasing history blob %s", sha);
		}
		*released += (int)n;
	}
	return 0;
}

int ah_history_blobs_sweep(ah_db *db, const ah_store *s, ah_arena *a, const char *agent_id, int batch,
                           int max_batches, int *released, ah_err *err)
{
	*released = 0;
	for (int i = 0; i < max_batches; i++) {
		int n;
		if (sweep_batch(db, s, a, agent_id, batch, &n, err) != 0)
			return AH_EFAIL;
		*released += n;
		if (n < batch)
			break; /* a short batch: nothing more is orphaned */
	}
	return 0;
}
