/* The runner's side of a deploy's record (schema/022_deploy_records.sql): its
 * start, the build's output as it comes, what was built, and which images the
 * agent keeps for a rollback.
 *
 * The output goes to the row itself, so that any API host reads it while the
 * build runs (runners and API hosts share only the database and the file
 * store). It is appended in chunks: each step's line at once; the output of
 * npm and the install scripts when 8 KiB have gathered or, as it arrives, a
 * second after the last write (the sandbox's reading loop calls us only when
 * there is output, so a quiet program's last line waits for its next one or
 * its end). The row keeps the last 256 KiB: the end of a build's output is
 * what explains its failure. */
#include "runner/runner.h"
#include "core/arena.h"
#include "core/log.h"
#include "core/util.h"
#include "files/files.h"
#include "runner/run_files.h"

#include <stdio.h>
#include <string.h>

#define LOG_KEEP 262144
#define FLUSH_BYTES 8192
#define FLUSH_MS 1000

/* RIGHT() of a blob counts bytes: a cut can split a UTF-8 sequence, which the
 * API's reading repairs. */
static const char SQL_APPEND[] =
	"UPDATE deploys SET log = RIGHT(CONCAT(COALESCE(log, ''), ?), " "262144" "),"
	" log_bytes = log_bytes + ? WHERE job_id = ?";

void ah_deploy_log_flush(struct ah_deploy_log *l)
{
	if (!l || l->len == 0)
		return;
	if (ah_db_exec(l->db, NULL, SQL_APPEND, "bii", l->buf, l->len, (long long)l->len, l->job_id) != 0)
		ah_log_warn("job=%lld: build output not recorded: %s", l->job_id, ah_db_error(l->db));
	l->len = 0;
	l->flushed_ms = ah_now_ms();
}

void ah_deploy_log_write(void *ctx, const char *text, size_t len)
{
	struct ah_deploy_log *l = ctx;
	/* A step's own line ("==> ...") goes out at once: the step after it
	 * (a clone, npm) may be silent for a long time. */
	bool step = len >= 4 && memcmp(text, "==> ", 4) == 0;
	while (len > 0) {
		size_t room = sizeof(l->buf) - l->len, n = len < room ? len : room;
		memcpy(l->buf + l->len, text, n);
		l->len += n;
		text += n;
		len -= n;
		if (l->len == sizeof(l->buf))
			ah_deploy_log_flush(l);
	}
	if (step || l->len >= FLUSH_BYTES || ah_now_ms() - l->flushed_ms >= FLUSH_MS)
		ah_deploy_log_flush(l);
}

void ah_deploy_log_open(struct ah_deploy_log *l, ah_db *db, long long job_id, int attempt)
{
	memset(l, 0, sizeof(*l));
	l->db = db;
	l->job_id = job_id;
	l->flushed_ms = ah_now_ms();
	/* The first claim is the deploy's start; a later attempt says so in its log. */
	ah_db_exec(db, NULL, "UPDATE deploys SET started_at = COALESCE(started_at, NOW(3)) "
	           "WHERE job_id = ?", "i", job_id);
	if (attempt > 1) {
		char line[80];
		int n = snprintf(line, sizeof line, "==> attempt %d\n", attempt);
		ah_deploy_log_write(l, line, (size_t)n);
	}
}

/* The commit a clone checked out, also when the build after it failed: the
 * user debugging it wants to know which. */
void ah_deploy_record_commit(ah_db *db, const struct ah_job *j)
{
	if (j->commit[0])
		ah_db_exec(db, NULL, "UPDATE deploys SET git_commit = ? WHERE job_id = ?", "si", j->commit,
		           j->id);
}

/* Inside the switch's transaction: the record takes the image's reference. */
int ah_deploy_record_active(ah_db *db, const struct ah_job *j, const char *image_dir,
                            const char *entrypoint, const char *commit)
{
	return ah_db_exec(db, NULL, "UPDATE deploys SET image_path = ?, image_sha256 = NULLIF(?, ''), "
	                  "image_kept = (? <> ''), entrypoint = ?, git_commit = NULLIF(?, ''), "
	                  "activated_at = NOW(3) WHERE job_id = ?", "sssssi", image_dir, j->image_sha,
	                  j->image_sha, entrypoint, commit ? commit : "", j->id);
}

static void drop_blob(ah_db *db, const struct ah_runner *r, const struct ah_job *j, const char *sha)
{
	ah_err err = {0};
	const ah_store *s = ah_run_files_store(r->cfg);
	if (sha && sha[0] && s && ah_blob_drop(db, s, sha, &err) != 0)
		ah_log_warn("%s: image %.12s left in the file store: %s", j->tag, sha, err.msg);
}

/* After a switch: the agent keeps the images of its last deploy_images_kept
 * activations (the active one always); older ones lose their reference, and
 * their bytes go with the last one. The conditional UPDATE makes sure that a
 * rollback's prune at the same moment drops nothing twice. The image the
 * switch replaced is dropped here too when no record names it (an agent
 * deployed before deploys were recorded): a record's reference is the
 * record's business. */
void ah_deploy_images_prune(ah_db *db, const struct ah_runner *r, const struct ah_job *j)
{
	ah_arena *a = ah_arena_new();
	ah_rows rows, held;
	long long keep = ah_settings_of(r->cfg)->deploy.images_kept;
	if (ah_db_query(db, a, &rows, "SELECT d.id, d.image_sha256, d.image_path = g.image_path "
	                "FROM deploys d JOIN agents g ON g.id = d.agent_id WHERE d.agent_id = ? "
	                "AND d.image_kept = 1 ORDER BY d.activated_at DESC, d.created_at DESC", "s",
	                j->agent_id) == 0) {
		long long slots = keep - 1; /* one is the active image's */
		for (size_t i = 0; i < rows.n; i++) {
			unsigned long long n = 0;
			const char *active = ah_cell(&rows, i, 2);
			if (active && strcmp(active, "1") == 0)
				continue;
			if (slots > 0) {
				slots--;
				continue;
			}
			/* Not the agent's image now: a rollback may have switched to it
			 * since the SELECT. */
			if (ah_db_exec(db, &n, "UPDATE deploys d SET d.image_kept = 0 WHERE d.id = ? AND "
			               "d.image_kept = 1 AND NOT EXISTS (SELECT 1 FROM agents g WHERE "
			               "g.id = d.agent_id AND g.image_path = d.image_path)", "s",
			               ah_cell(&rows, i, 0)) == 0 && n == 1) {
				ah_log_info("%s: image of deploy %s released (deploy_images_kept = %lld)", j->tag,
				            ah_cell(&rows, i, 0), keep);
				drop_blob(db, r, j, ah_cell(&rows, i, 1));
			}
		}
	}
	if (j->old_image_sha[0] &&
	    ah_db_query(db, a, &held, "SELECT 1 FROM deploys WHERE agent_id = ? AND image_sha256 = ? "
	                "AND job_id <> ? LIMIT 1", "ssi", j->agent_id,
	                j->old_image_sha, j->id) == 0 && held.n == 0)
		drop_blob(db, r, j, j->old_image_sha);
	ah_arena_destroy(a);
}
