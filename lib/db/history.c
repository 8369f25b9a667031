/* See history.h. */
#include "db/history.h"

/* The cut-off is computed once per call: a batch never chases rows that aged
 * meanwhile. invocations_created makes each batch a range walk from the oldest
 * row, locking only the rows it deletes, never the newest end where invocations
 * are being recorded. */
static const char SQL_CUTOFF[] = "SELECT NOW(3) - INTERVAL ? DAY";
static const char SQL_PURGE[] =
	"DELETE FROM invocations WHERE created_at < ? ORDER BY created_at LIMIT ?";

int ah_history_purge(ah_db *db, long long days, long long batch, long long max_batches,
                     long long *purged, ah_err *err)
{
	ah_arena *a = ah_arena_new();
	ah_rows rows;
	int rc = 0;
	*purged = 0;
	if (days <= 0 || max_batches <= 0)
		goto done;
	if (ah_db_query(db, a, &rows, SQL_CUTOFF, "i", days) != 0 || rows.n != 1) {
		rc = ah_err_set(err, AH_EFAIL, "history cut-off: %s", ah_db_error(db));
		goto done;
	}
	const char *cutoff = ah_strdup(a, ah_cell(&rows, 0, 0));
	for (long long i = 0; i < max_batches; i++) {
		unsigned long long n = 0;
		/* Autocommit: every batch is its own transaction. */
		if (ah_db_exec(db, &n, SQL_PURGE, "si", cutoff, batch) != 0) {
			rc = ah_err_set(err, AH_EFAIL, "purging history: %s", ah_db_error(db));
			break;
		}
		*purged += (long long)n;
		if ((long long)n < batch)
			break;
	}
done:
	ah_arena_destroy(a);
	return rc;
}
