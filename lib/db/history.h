/* Retention of the invocation history (history_retention_days): rows older than
 * that are deleted in small batches, each its own short transaction, oldest
 * first, so recording new invocations never waits on a long lock. usage_daily
 * is not touched: a user's totals outlive the rows they were counted from; the
 * list counts follow by the rows' own delete triggers. */
#ifndef AH_DB_HISTORY_H
#define AH_DB_HISTORY_H

#include "db/db.h"

#define AH_HISTORY_BATCH 500

/* Deletes invocations created more than days ago (days 0: keeps everything),
 * at most max_batches batches of batch rows; *purged counts the rows. 0, or
 * AH_EFAIL with err set (what was deleted before stays deleted). */
int ah_history_purge(ah_db *db, long long days, long long batch, long long max_batches,
                     long long *purged, ah_err *err);

#endif
