/* The registry's record and lock (sandboxes.c), shared with its warm part
 * (sandboxes_warm.c). Private to the runner's registry. */
#ifndef AH_RUNNER_SANDBOXES_INT_H
#define AH_RUNNER_SANDBOXES_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "runner/sandboxes.h"

struct ah_sbx_entry {
	char agent_id[33];
	char session[129];        /* "" for an ephemeral sandbox */
	char image[1024];
	ah_sandbox *sb;
	pthread_mutex_t run_mu;
	int refs;                 /* leases held or waited for */
	bool doomed;              /* destroy at the last release */
	bool spare;               /* built ahead for the agent's next ephemeral call */
	bool warm;                /* a spare whose program waits for a call of fp (warm.h) */
	bool ready;               /* warm, and its program has reached its read of stdin */
	bool died;
	bool held;                /* a session's: its next process waits in sb for fp */
	int64_t held_idle_ms;     /* held: stopped after this long without a call */                /* warm, and its program ended while it waited */
	char fp[AH_SBX_FP_LEN + 1];
	char key[AH_SBX_KEY_LEN + 1]; /* the warm program's gateway token, or "" */
	int64_t last_used_ms;
	struct ah_sbx_entry *next;
};

/* ah_sbx_mu guards the list and every entry's bookkeeping. */
extern pthread_mutex_t ah_sbx_mu;
extern struct ah_sbx_entry *ah_sbx_entries;

/* Lock held: a new entry at the list's head (NULL: out of memory). */
struct ah_sbx_entry *ah_sbx_new_entry(const char *agent_id, const char *session, const char *image);
/* Destroys every doomed entry nobody holds, outside the lock. */
void ah_sbx_sweep(void);

#endif
