/* Calls in progress (issue 28): invocations_running and its owner's lock
 * (schema/024). invoke_async.c makes and ends the rows; invocation.c reads
 * them (GET, cancel); invocation_sweep.c records the calls whose owner is
 * gone. The owner takes the lock before it makes the row: a row whose lock
 * nobody holds has lost its owner. */
#ifndef AH_HANDLERS_RUNNING_H
#define AH_HANDLERS_RUNNING_H

#include "invoke.h"

/* The lock's name is this followed by the invocation id. */
#define AH_RUNNING_LOCK "agenthost_inv_"
/* Taking (without waiting) and releasing it, the id bound as the one parameter. */
#define AH_RUNNING_SQL_LOCK "SELECT GET_LOCK(CONCAT('" AH_RUNNING_LOCK "', ?), 0)"
#define AH_RUNNING_SQL_UNLOCK "SELECT RELEASE_LOCK(CONCAT('" AH_RUNNING_LOCK "', ?))"
/* A Galera node sees only its own clients' locks: there an unheld lock means
 * a lost owner only once the longest call (600 s) and its slack are over. p is
 * the row's table prefix in the statement ("r." or ""). */
#define AH_RUNNING_GALERA_YOUNG(p) "(@@wsrep_on = 1 AND " p "created_at > NOW(3) - INTERVAL 700 SECOND)"
/* The row's owner lives: its lock is held, or (Galera) it may be held elsewhere. */
#define AH_RUNNING_OWNER_MAY_LIVE(p)                                                               \
	"(IS_USED_LOCK(CONCAT('" AH_RUNNING_LOCK "', " p "id)) IS NOT NULL OR " AH_RUNNING_GALERA_YOUNG(p) ")"

/* The lock, then the row, on r->db (an asynchronous call's owner process;
 * a streamed call's worker). */
int ah_running_begin(ah_req *r, const ah_call *c);
/* After the call is recorded: the row gone, the lock released. */
void ah_running_end(ah_req *r, const ah_call *c);

/* The row id, if its owner is gone: the call recorded failed with that
 * reason (unless its owner had recorded it) and the row removed: 0 (also
 * when there is no row). 1: its owner lives (or another settler has it),
 * nothing done. AH_EFAIL: a database error. (invocation_sweep.c) */
int ah_running_settle(ah_req *r, const char *id);
/* Settles every row whose owner is gone (the API master's background
 * process, every running_sweep_ms). */
int ah_running_sweep(ah_req *r);

#endif
