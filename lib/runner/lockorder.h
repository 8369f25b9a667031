/* The runner's lock order, checked in debug builds (see sandboxes_int.h for
 * what each lock guards):
 *
 *   1. a sandbox's run mutex (ah_sbx_entry.run_mu: a lease holds it)
 *   2. the bucket mounts' mutex (fuse.c)
 *   3. the registry's mutex (ah_sbx_mu)
 *
 * A thread takes a lock only when it holds none of the same or a later rank:
 * acquire checks the mounts with its run mutex held, the mounts' idle reap
 * counts the registry's entries with the mounts' mutex held, and nothing
 * waits for a lower rank with a higher one held. One run mutex at a time
 * (a trylock is exempt: it cannot wait). The runner's other mutexes (warm.c's
 * recipes, ops.c's slots, egress.c's and cancel.c's lists) are leaves: nothing
 * else is taken while one is held. Without NDEBUG a thread that breaks
 * the order aborts (ah_runner_violation_hook: tests catch it instead); with
 * NDEBUG all of this compiles to the plain calls. */
#ifndef AH_RUNNER_LOCKORDER_H
#define AH_RUNNER_LOCKORDER_H

#include <pthread.h>

enum ah_lock_rank { AH_LOCK_RUN = 1, AH_LOCK_FUSE, AH_LOCK_SBX, AH_LOCK_RANKS };

/* Called, instead of abort, with a sentence on a broken rule (lock order,
 * sandbox state): for the unit tests. NULL: log and abort. */
extern void (*ah_runner_violation_hook)(const char *what);
void ah_runner_violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#ifdef NDEBUG
static inline void ah_lock_check(enum ah_lock_rank r) { (void)r; }
static inline void ah_lock_note(enum ah_lock_rank r, int d) { (void)r; (void)d; }
#else
/* Before waiting for a lock of rank r: none of rank >= r is held. */
void ah_lock_check(enum ah_lock_rank r);
/* The calling thread now holds (d = 1) or let go (d = -1) a lock of rank r. */
void ah_lock_note(enum ah_lock_rank r, int d);
#endif

static inline void ah_lock(pthread_mutex_t *m, enum ah_lock_rank r)
{
	ah_lock_check(r);
	pthread_mutex_lock(m);
	ah_lock_note(r, 1);
}

/* 0 when taken, as pthread_mutex_trylock. */
static inline int ah_trylock(pthread_mutex_t *m, enum ah_lock_rank r)
{
	int rc = pthread_mutex_trylock(m);
	if (rc == 0)
		ah_lock_note(r, 1);
	return rc;
}

static inline void ah_unlock(pthread_mutex_t *m, enum ah_lock_rank r)
{
	ah_lock_note(r, -1);
	pthread_mutex_unlock(m);
}

#endif
