/* Warm agents (issue 15): for an agent with min_warm = N the runner keeps up
 * to N sandboxes in which the agent's program has already started (its
 * top-level code ran) and waits for its prompt on stdin; an ephemeral call
 * takes one (ah_sandboxes_take_warm) and only writes the prompt.
 *
 * What a warm process runs with is a *recipe*: the image, entrypoint,
 * environment (secrets, model key) and attached files of the agent's last
 * call, hashed into a fingerprint. The runner never holds an agent's secrets
 * otherwise, so warm processes start after the agent's first call, from that
 * call's request. A call takes only a warm process of its own fingerprint: a
 * secret set or deleted, a redeploy or a different min_warm changes what the
 * call carries, and the warm processes that no longer match are retired
 * before anything runs in them (the API also asks for that at once:
 * retire_warm). Nothing the caller sees changes but the time.
 *
 * One thread (ah_warm_thread) does the work off every call's path: it starts
 * the missing warm processes one at a time, when no call is starting or
 * ending (ah_sandbox_wait_quiet); replaces those that died while waiting
 * (logged; after MAX_DEATHS in a row it waits for a new recipe: an agent
 * whose top-level code exits would otherwise be restarted forever); and drops
 * the recipe and its processes after warm_idle_seconds without a call. */
#ifndef AH_RUNNER_WARM_H
#define AH_RUNNER_WARM_H

#include <stdint.h>

#include "runner/run_req.h"
#include "runner/runner.h"
#include "runner/sandboxes.h"

/* The fingerprint of what q would run: image, entrypoint, environment (in
 * any order), attached files. */
void ah_warm_fingerprint(char out[AH_SBX_FP_LEN + 1], const struct ah_run_req *q);

/* An ephemeral call of q's agent with its min_warm: records the recipe
 * (min_warm > 0), kept until idle_ms pass without a call, or drops it (0). */
void ah_warm_note(const struct ah_run_req *q, const char *fp, int64_t idle_ms);
/* n warm processes of fp were found dead by a call. */
void ah_warm_deaths(const char *agent_id, const char *fp, int n);
/* The agent's recipe and warm processes go (stop, redeploy, delete, a
 * changed secret or min_warm). */
void ah_warm_forget(const char *agent_id);
/* The recipe forgotten, then every sandbox of the agent destroyed (stop,
 * redeploy, delete): their number. */
int ah_warm_destroy_agent(const char *agent_id);
/* Something to do: a call took a warm process, or gave a recipe. */
void ah_warm_kick(void);

/* Sessions of a warm agent: after a call, the session's next process is
 * started in its sandbox (with the call's environment) once the answer is
 * out; the next call of the session with the same fingerprint takes it
 * (ah_sandboxes_lease_held). NULL: out of memory (nothing is started). */
struct ah_warm_next;
struct ah_warm_next *ah_warm_next_of(const ah_config *cfg, const struct ah_run_req *q,
                                     const char *fp);
void ah_warm_next_start(struct ah_warm_next *n, struct ah_sbx_lease *lease);
void ah_warm_next_free(struct ah_warm_next *n);

void *ah_warm_thread(void *arg);  /* arg: the struct ah_runner */
void ah_warm_stop(void);

#endif
