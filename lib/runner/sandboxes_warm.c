/* Warm sandboxes in the registry (sandboxes.h, warm.h): spares of an agent
 * in which its program was started for a call of one fingerprint. They live
 * in the registry so that everything else holds for them too: images in use
 * stay, destroy_agent takes them, the budget counts them. */
#include "runner/sandboxes.h"
#include "runner/sandboxes_int.h"
#include "runner/egress.h"
#include "runner/fuse.h"
#include "core/log.h"
#include "core/util.h"

#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

/* Lock held. Whether a warm entry of the agent is usable for fp; one of
 * another fingerprint is retired, and one whose program ended while it
 * waited is logged and destroyed (counted in *dead). */
static bool warm_usable(struct ah_sbx_entry *e, const char *agent_id, const char *fp, int *dead)
{
	if (!ah_sbx_is_warm(e) || e->doomed || strcmp(e->agent_id, agent_id) != 0)
		return false;
	if (strcmp(e->fp, fp) != 0) {
		e->doomed = e->refs == 0 || e->doomed;
		return false;
	}
	if (e->refs > 0 || !e->sb)
		return false; /* being started */
	if (!ah_sandbox_exec_waiting(e->sb)) {
		ah_log_warn("agent=%s sandbox=%s: its warm process ended while it waited for a call "
		            "(memory, or its own exit): replaced", e->agent_id, ah_sandbox_id(e->sb));
		e->doomed = true;
		ah_sbx_set_state(e, AH_SBX_WARM_DIED);
		(*dead)++;
		return false;
	}
	return true;
}

int ah_sandboxes_take_warm(struct ah_sbx_lease *out, const char *agent_id, const char *fp,
                           char key[AH_SBX_KEY_LEN + 1], int *dead)
{
	struct ah_sbx_entry *got = NULL;
	*dead = 0;
	ah_sbx_lock();
	/* A ready one first; else one still starting beats a cold start. */
	for (struct ah_sbx_entry *e = ah_sbx_entries; e; e = e->next)
		if (warm_usable(e, agent_id, fp, dead) &&
		    (!got || (ah_sbx_is_ready(e) && !ah_sbx_is_ready(got))))
			got = e;
	if (got) {
		ah_sbx_set_state(got, AH_SBX_EPHEMERAL); /* an ordinary ephemeral entry now */
		got->refs++;
		memcpy(key, got->key, AH_SBX_KEY_LEN + 1);
		sodium_memzero(got->key, sizeof got->key);
	}
	ah_sbx_unlock();
	ah_sbx_sweep();
	if (!got)
		return AH_ENOTFOUND;
	ah_lock(&got->run_mu, AH_LOCK_RUN);
	out->entry = got;
	out->sb = got->sb;
	return 0;
}

int ah_sandboxes_warm_count(const char *agent_id, const char *fp, int *dead)
{
	int n = 0;
	*dead = 0;
	ah_sbx_lock();
	for (struct ah_sbx_entry *e = ah_sbx_entries; e; e = e->next)
		if (warm_usable(e, agent_id, fp, dead) ||
		    (ah_sbx_is_warm(e) && !e->doomed && e->refs > 0 && strcmp(e->agent_id, agent_id) == 0))
			n++;
	ah_sbx_unlock();
	ah_sbx_sweep();
	return n;
}

int ah_sandboxes_add_warm(const char *agent_id, const char *image, const char *fp,
                          ah_sbx_start_fn start, void *ctx, ah_err *err)
{
	ah_sbx_lock();
	struct ah_sbx_entry *e = ah_sbx_new_entry(agent_id, NULL, image, AH_SBX_WARM);
	if (e) {
		snprintf(e->fp, sizeof e->fp, "%s", fp);
		e->refs = 1; /* starting: neither taken nor swept */
	}
	ah_sbx_unlock();
	if (!e)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	ah_sandbox_bind *binds = NULL;
	size_t nbinds = 0;
	ah_sandbox *sb = NULL;
	char key[AH_SBX_KEY_LEN + 1] = "";
	ah_sandbox_egress *eg = NULL;
	int rc = ah_fuse_binds(agent_id, image, AH_FUSE_FOR_SPARE, &binds, &nbinds, err);
	if (rc == 0) {
		ah_sandbox_spec spec = {.image_dir = image, .ahead = true, .binds = binds,
		                        .nbinds = nbinds};
		rc = ah_egress_spec(agent_id, &spec, &eg, err);
		if (rc == 0)
			rc = ah_sandbox_create(&sb, &spec, err);
	}
	free(eg);
	ah_fuse_binds_free(binds, nbinds);
	if (rc == 0)
		rc = start(sb, ctx, key, err);
	ah_sbx_lock();
	e->sb = sb;
	memcpy(e->key, key, sizeof key);
	e->refs--;
	e->last_used_ms = ah_now_ms();
	if (rc != 0)
		e->doomed = true;
	ah_sbx_unlock();
	sodium_memzero(key, sizeof key);
	ah_sbx_sweep(); /* failed, or doomed meanwhile (destroy_agent, retire_warm) */
	return rc;
}

/* Sessions' next processes stop (the agent's, or with idle those of sessions
 * idle past their warm_idle_seconds); their sandboxes stay. */
static void drop_held(const char *agent_id, bool idle)
{
	enum { BATCH = 64 };
	struct ah_sbx_entry *pinned[BATCH];
	int n = 0;
	int64_t now = ah_now_ms();
	ah_sbx_lock();
	for (struct ah_sbx_entry *e = ah_sbx_entries; e && n < BATCH; e = e->next)
		if (ah_sbx_is_held(e) && !e->doomed && e->sb &&
		    (!agent_id || strcmp(e->agent_id, agent_id) == 0) &&
		    (!idle || (e->refs == 0 && now - e->last_used_ms > e->held_idle_ms)))
			(pinned[n++] = e)->refs++;
	ah_sbx_unlock();
	for (int i = 0; i < n; i++) {
		struct ah_sbx_entry *e = pinned[i];
		/* A call of the session holds it (for up to its timeout): that call
		 * takes or cancels the waiting process itself, and any process it
		 * leaves is checked by the next call's fingerprint. */
		bool broken = false;
		if (ah_trylock(&e->run_mu, AH_LOCK_RUN) == 0) {
			ah_sbx_lock();
			bool still = ah_sbx_is_held(e);
			if (still)
				ah_sbx_set_state(e, AH_SBX_SESSION);
			ah_sbx_unlock();
			broken = still && ah_sandbox_exec_cancel(e->sb, "warm retired") != 0;
			ah_unlock(&e->run_mu, AH_LOCK_RUN);
		}
		ah_sbx_lock();
		e->doomed = e->doomed || broken;
		e->refs--;
		ah_sbx_unlock();
	}
	ah_sbx_sweep();
}

int ah_sandboxes_retire_warm(const char *agent_id, int keep)
{
	if (keep == 0)
		drop_held(agent_id, false);
	int n = 0, kept = 0;
	ah_sbx_lock();
	for (struct ah_sbx_entry *e = ah_sbx_entries; e; e = e->next) {
		if (!ah_sbx_is_warm(e) || e->doomed || (agent_id && strcmp(e->agent_id, agent_id) != 0))
			continue;
		if (kept < keep && e->refs == 0) {
			kept++;
			continue;
		}
		e->doomed = true;
		n++;
	}
	ah_sbx_unlock();
	ah_sbx_sweep();
	return n;
}

size_t ah_sandboxes_warm_total(const char *agent_id)
{
	size_t n = 0;
	ah_sbx_lock();
	for (struct ah_sbx_entry *e = ah_sbx_entries; e; e = e->next)
		n += ah_sbx_is_ready(e) && !e->doomed && e->sb && e->refs == 0 &&
		     (!agent_id || strcmp(e->agent_id, agent_id) == 0);
	ah_sbx_unlock();
	return n;
}

/* A program that never reads stdin the ways ah_sandbox_exec_reading sees
 * (it awaits something else first) counts as ready after this. */
#define WARM_READY_GIVE_UP_MS 5000

void ah_sandboxes_drop_idle_held(void)
{
	drop_held(NULL, true);
}

/* Lock held. A warm or held entry's program has reached its read of stdin
 * (one that changed state meanwhile stays as it is). */
static void mark_ready(struct ah_sbx_entry *e)
{
	if (e->state == AH_SBX_WARM)
		ah_sbx_set_state(e, AH_SBX_WARM_READY);
	else if (e->state == AH_SBX_HELD)
		ah_sbx_set_state(e, AH_SBX_HELD_READY);
}

int ah_sandboxes_warm_poll(void)
{
	enum { BATCH = 32 };
	struct ah_sbx_entry *pinned[BATCH];
	int n = 0, left = 0;
	int64_t now = ah_now_ms();
	ah_sbx_lock();
	for (struct ah_sbx_entry *e = ah_sbx_entries; e; e = e->next) {
		if ((e->state != AH_SBX_WARM && e->state != AH_SBX_HELD) || e->doomed || !e->sb || e->refs > 0)
			continue;
		if (now - e->last_used_ms > WARM_READY_GIVE_UP_MS)
			mark_ready(e);
		else if (n < BATCH)
			(pinned[n++] = e)->refs++; /* read /proc outside the lock */
		else
			left++;
	}
	ah_sbx_unlock();
	bool ready[BATCH];
	for (int i = 0; i < n; i++)
		ready[i] = ah_sandbox_exec_reading(pinned[i]->sb);
	ah_sbx_lock();
	for (int i = 0; i < n; i++) {
		if (ready[i])
			mark_ready(pinned[i]);
		pinned[i]->refs--;
		left += !ready[i];
	}
	ah_sbx_unlock();
	ah_sbx_sweep(); /* one doomed meanwhile */
	return left;
}

/* ---- a session's next process (warm.h: ah_warm_next_*) ---- */

bool ah_sandboxes_lease_held(struct ah_sbx_lease *l, const char *fp, char key[AH_SBX_KEY_LEN + 1])
{
	struct ah_sbx_entry *e = l->entry;
	ah_sbx_lock();
	bool mine = ah_sbx_is_held(e) && strcmp(e->fp, fp) == 0;
	if (ah_sbx_is_held(e))
		ah_sbx_set_state(e, AH_SBX_SESSION);
	if (mine)
		memcpy(key, e->key, AH_SBX_KEY_LEN + 1);
	sodium_memzero(e->key, sizeof e->key);
	ah_sbx_unlock();
	/* One that ended while it waited is not handed the prompt: the call
	 * runs a fresh one (ah_sandbox_exec cancels it, logging its stderr). */
	if (mine && !ah_sandbox_exec_waiting(l->sb)) {
		ah_log_warn("agent=%s session=%s: its next process ended while it waited: a fresh "
		            "one runs the call", e->agent_id, e->session);
		mine = false;
	}
	return mine;
}

void ah_sandboxes_lease_set_held(struct ah_sbx_lease *l, const char *fp,
                                 const char key[AH_SBX_KEY_LEN + 1], int64_t idle_ms)
{
	struct ah_sbx_entry *e = l->entry;
	ah_sbx_lock();
	ah_sbx_set_state(e, AH_SBX_HELD); /* not ready: a new process */
	e->held_idle_ms = idle_ms;
	snprintf(e->fp, sizeof e->fp, "%s", fp);
	memcpy(e->key, key, AH_SBX_KEY_LEN + 1);
	e->last_used_ms = ah_now_ms();
	ah_sbx_unlock();
}

void ah_sandboxes_census(struct ah_sbx_census *out)
{
	*out = (struct ah_sbx_census){0};
	ah_sbx_lock();
	for (struct ah_sbx_entry *e = ah_sbx_entries; e; e = e->next) {
		if (!e->sb)
			continue; /* still being made */
		if (e->refs > 0)
			out->busy++;
		else if (ah_sbx_is_warm(e))
			out->warm++;
		else
			out->idle++;
	}
	ah_sbx_unlock();
}
