/* The registry's record and lock (sandboxes.c), shared with its warm part
 * (sandboxes_warm.c) and its state machine (sandboxes_state.c). Private to
 * the runner's registry.
 *
 * Lock order (lockorder.h, asserted in debug builds): an entry's run_mu,
 * then the bucket mounts' mutex (fuse.c), then ah_sbx_mu. No lock is held
 * across a process start: sandboxes are made and warm programs started with
 * the entry marked (refs > 0, sb NULL) and no lock held; rclone starts
 * outside the mounts' mutex (fuse.c). */
#ifndef AH_RUNNER_SANDBOXES_INT_H
#define AH_RUNNER_SANDBOXES_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "runner/lockorder.h"
#include "runner/sandboxes.h"

/* What an entry is for. Every change goes through ah_sbx_set_state, which
 * refuses a change its table does not list (ah_sbx_state_allowed):
 *
 *   NEW -> EPHEMERAL            acquire without a session
 *   NEW -> SESSION              acquire of a session
 *   NEW -> SPARE                build_spare, after an ephemeral call
 *   NEW -> WARM                 add_warm (warm.c's thread)
 *   SPARE -> EPHEMERAL          taken by an ephemeral acquire
 *   WARM -> WARM_READY          warm_poll: its program reads stdin
 *   WARM, WARM_READY -> EPHEMERAL   taken by a call of its fingerprint
 *   WARM, WARM_READY -> WARM_DIED   its program ended while it waited
 *   SESSION, HELD, HELD_READY -> HELD   after a call: its next process started
 *   HELD -> HELD_READY          warm_poll
 *   HELD, HELD_READY -> SESSION a call takes (or refuses) the next process,
 *                               or it stops idle / retired
 *
 * Doomed is not a state: an entry of any state is doomed when it must go,
 * and goes at its last release (ah_sbx_sweep); what it was still decides
 * how (WARM_DIED: its stderr into the log). sb is NULL while the sandbox is
 * being made. */
enum ah_sbx_state {
	AH_SBX_NEW,          /* just linked: no state yet */
	AH_SBX_EPHEMERAL,    /* one call's own, destroyed at its release */
	AH_SBX_SPARE,        /* built ahead for the agent's next ephemeral call */
	AH_SBX_WARM,         /* a spare whose program waits for a call of fp (warm.h) */
	AH_SBX_WARM_READY,   /* warm, and its program has reached its read of stdin */
	AH_SBX_WARM_DIED,    /* warm, and its program ended while it waited (doomed) */
	AH_SBX_SESSION,      /* a session's, between and during its calls */
	AH_SBX_HELD,         /* a session's whose next process waits in sb for fp */
	AH_SBX_HELD_READY,   /* held, and that process has reached its read of stdin */
	AH_SBX_NSTATES
};

struct ah_sbx_entry {
	char agent_id[33];
	char session[129];        /* the session's name; "" unless a session state */
	char image[1024];
	ah_sandbox *sb;
	pthread_mutex_t run_mu;
	int refs;                 /* leases held or waited for */
	bool doomed;              /* destroy at the last release */
	enum ah_sbx_state state;
	int64_t held_idle_ms;     /* held: stopped after this long without a call */
	char fp[AH_SBX_FP_LEN + 1];
	char key[AH_SBX_KEY_LEN + 1]; /* the warm program's gateway token, or "" */
	int64_t last_used_ms;
	struct ah_sbx_entry *next;
};

/* Whether from -> to is in the table above. */
bool ah_sbx_state_allowed(enum ah_sbx_state from, enum ah_sbx_state to);
const char *ah_sbx_state_name(enum ah_sbx_state s);
/* Lock held. Moves e to state to: 0, or -1 and e unchanged when the table
 * does not allow it (ah_runner_violation: an abort in debug builds). */
int ah_sbx_set_state(struct ah_sbx_entry *e, enum ah_sbx_state to);

/* The old flags, as questions about the state. */
static inline bool ah_sbx_is_warm(const struct ah_sbx_entry *e)
{
	return e->state == AH_SBX_WARM || e->state == AH_SBX_WARM_READY ||
	       e->state == AH_SBX_WARM_DIED;
}
/* Built ahead: a cold spare or a warm one. */
static inline bool ah_sbx_is_spare(const struct ah_sbx_entry *e)
{
	return e->state == AH_SBX_SPARE || ah_sbx_is_warm(e);
}
static inline bool ah_sbx_is_held(const struct ah_sbx_entry *e)
{
	return e->state == AH_SBX_HELD || e->state == AH_SBX_HELD_READY;
}
static inline bool ah_sbx_is_ready(const struct ah_sbx_entry *e)
{
	return e->state == AH_SBX_WARM_READY || e->state == AH_SBX_HELD_READY;
}
static inline bool ah_sbx_is_session(const struct ah_sbx_entry *e)
{
	return e->state == AH_SBX_SESSION || ah_sbx_is_held(e);
}

/* ah_sbx_mu guards the list and every entry's bookkeeping. */
extern pthread_mutex_t ah_sbx_mu;
extern struct ah_sbx_entry *ah_sbx_entries;

static inline void ah_sbx_lock(void)
{
	ah_lock(&ah_sbx_mu, AH_LOCK_SBX);
}
static inline void ah_sbx_unlock(void)
{
	ah_unlock(&ah_sbx_mu, AH_LOCK_SBX);
}

/* Lock held: a new entry at the list's head in state (NULL: out of memory). */
struct ah_sbx_entry *ah_sbx_new_entry(const char *agent_id, const char *session, const char *image,
                                      enum ah_sbx_state state);
/* Destroys every doomed entry nobody holds, outside the lock. */
void ah_sbx_sweep(void);

#endif
