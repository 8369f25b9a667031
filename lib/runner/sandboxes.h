/* The runner's sandbox registry: which sandbox serves which (agent, session),
 * who is using it right now, and which image directories are still in use.
 *
 * A caller acquires a lease, runs in the leased sandbox, and releases it.
 * Leases of one session are serialized (the session's mutex is held for the
 * lease); ephemeral leases (session NULL) get a sandbox of their own that is
 * destroyed on release (a spare built ahead for the agent, when there is
 * one). Destroying something in use only marks it: the last release destroys
 * it, so no sandbox is ever destroyed under a running exec.
 * Retired images (after a redeploy) are removed once no sandbox uses them. */
#ifndef AH_RUNNER_SANDBOXES_H
#define AH_RUNNER_SANDBOXES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "sandbox/sandbox.h"

struct ah_sbx_entry;

struct ah_sbx_lease {
	struct ah_sbx_entry *entry;
	ah_sandbox *sb;
};

/* session_give_way_ms: at the host's sandbox budget, a session sandbox idle
 * this long gives its room to a new call (session_give_way_seconds). */
void ah_sandboxes_init(int64_t session_give_way_ms);

/* Finds or creates the sandbox for (agent_id, session) over image. A session
 * whose sandbox runs an older image gets a fresh sandbox. */
int ah_sandboxes_acquire(struct ah_sbx_lease *out, const char *agent_id, const char *session,
                         const char *image, ah_err *err);
/* broken: the sandbox failed (ah_sandbox_exec returned AH_EFAIL): destroy it.
 * An ephemeral sandbox is destroyed, and (unless broken) the agent's spare is
 * built, so that its next ephemeral acquire takes one ready-made; that blocks
 * ~1 ms: release an ephemeral lease after the answer has been sent. Spares go
 * with their agent (destroy_agent) and after a minute unused (reap_idle). */
void ah_sandboxes_release(struct ah_sbx_lease *lease, bool broken);

/* Number destroyed (or marked, when in use). */
int ah_sandboxes_destroy_session(const char *agent_id, const char *session);
int ah_sandboxes_destroy_agent(const char *agent_id);
void ah_sandboxes_destroy_all(void);
size_t ah_sandboxes_count(void);
/* The registry's sandboxes by state, for the metrics (runner/metrics.c): busy
 * (a lease holds or waits for it), warm (its program waits for a call), idle
 * (a session's between calls, a spare). */
struct ah_sbx_census {
	size_t busy, warm, idle;
};
void ah_sandboxes_census(struct ah_sbx_census *out);
/* Entries (sandboxes, spares, ones being made) of the agent. */
size_t ah_sandboxes_agent_count(const char *agent_id);

/* Destroys session sandboxes idle longer than idle_ms and calls fn for each
 * (outside the registry lock) so the caller can expire the session row; also
 * for the sessions whose idle sandbox gave way to a call at the host's
 * sandbox budget since the last reap (acquire). */
typedef void (*ah_sbx_reaped_fn)(const char *agent_id, const char *session, void *ctx);
int ah_sandboxes_reap_idle(int64_t idle_ms, ah_sbx_reaped_fn fn, void *ctx);

/* ---- warm sandboxes (runner/warm.h) ----
 * A warm sandbox is a spare of the agent in which its program was started
 * (ah_sandbox_exec_start) for a call whose program, image and environment
 * hash to fp; only a call of the same fp takes it. */
#define AH_SBX_FP_LEN 64          /* hex */
#define AH_SBX_KEY_LEN 79

/* Starts the program in a new warm sandbox; may set key (the gateway token
 * its environment carries). 0 or an error code with err set. */
typedef int (*ah_sbx_start_fn)(ah_sandbox *sb, void *ctx, char key[AH_SBX_KEY_LEN + 1],
                               ah_err *err);

/* Takes a warm sandbox of the agent started for fp whose program still waits:
 * 0 and the lease (release it as an ephemeral one), or AH_ENOTFOUND. On the
 * way, warm sandboxes of another fp are retired and ones whose program ended
 * while waiting are logged and destroyed (*dead: how many). */
int ah_sandboxes_take_warm(struct ah_sbx_lease *out, const char *agent_id, const char *fp,
                           char key[AH_SBX_KEY_LEN + 1], int *dead);
/* The agent's warm sandboxes for fp, waiting or being started (the same
 * retiring and reaping on the way). */
int ah_sandboxes_warm_count(const char *agent_id, const char *fp, int *dead);
/* Makes one (blocks: pool take, /app, start). */
int ah_sandboxes_add_warm(const char *agent_id, const char *image, const char *fp,
                          ah_sbx_start_fn start, void *ctx, ah_err *err);
/* Retires the agent's (NULL: every agent's) warm sandboxes but keep of them.
 * The number retired. */
int ah_sandboxes_retire_warm(const char *agent_id, int keep);
/* Sessions (warm.h): with the session's lease held, whether its sandbox's
 * started program is of fp and still waits (then it is the call's to finish,
 * with key); the held mark goes either way. set_held marks one just started. */
bool ah_sandboxes_lease_held(struct ah_sbx_lease *l, const char *fp, char key[AH_SBX_KEY_LEN + 1]);
void ah_sandboxes_lease_set_held(struct ah_sbx_lease *l, const char *fp,
                                 const char key[AH_SBX_KEY_LEN + 1], int64_t idle_ms);
/* Sessions' next processes idle past their idle_ms stop (their sandboxes stay). */
void ah_sandboxes_drop_idle_held(void);
/* Marks the warm sandboxes whose program has reached its read of stdin
 * ready; returns how many are not yet. */
int ah_sandboxes_warm_poll(void);
/* Warm sandboxes ready on this runner, or of one agent (its state: ping). */
size_t ah_sandboxes_warm_total(const char *agent_id);

/* The image directory is no longer an agent's current image: remove it now, or
 * when the last sandbox over it is destroyed. */
void ah_sandboxes_retire_image(const char *image);

#endif
