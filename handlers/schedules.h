/* Schedules (issue 32), shared by their records (schedules.c) and the
 * scheduler that runs them (schedule_run.c). */
#ifndef AH_HANDLERS_SCHEDULES_H
#define AH_HANDLERS_SCHEDULES_H

#include <stdbool.h>

#include "core/arena.h"
#include "core/config.h"
#include "db/db.h"

/* A schedules row (schema/029_schedules.sql). */
typedef struct ah_schedule {
	const char *id, *cron, *timezone, *prompt, *session_id, *webhook_url;
	bool paused;
	const char *next_run_at;     /* DB DATETIME(3) text, UTC; NULL while paused */
	long long next_run_unix;     /* the same in Unix seconds (0: NULL) */
	const char *last_run_at, *last_invocation_id, *last_status, *last_error;
	long long run_count;
	const char *created_at, *updated_at;
} ah_schedule;

/* Row of a SELECT of schedules.c's column list, parsed. */
const ah_schedule *ah_schedule_from_row(ah_arena *a, char *const *row);

/* The database's clock in Unix seconds: every host's "now" for schedules. */
int ah_schedule_db_now(ah_db *db, ah_arena *a, long long *out);

/* The first tick of cron in zone after `after` (Unix seconds); 0 if none. */
long long ah_schedule_next(const char *cron, const char *zone, long long after);

/* The scheduler: a process the API's master keeps running (main.c hands it
 * in as the app's background task). Polls for due schedules every
 * schedule_poll_ms (where `scheduler` is on) and runs each claimed tick
 * through the invoke handler's own code; sweeps the calls whose owner is
 * gone every running_sweep_ms. Returns the process's exit status.
 * (schedule_run.c) */
int ah_scheduler_run(const ah_config *cfg);

#endif
