/* See sandboxes.h; the entries' states and lock order: sandboxes_int.h. One
 * mutex guards the list and every entry's bookkeeping (state, refs, doomed,
 * last use); each entry has its own run mutex that a lease holds, which
 * serializes calls within a session. Sandboxes are created and destroyed
 * outside the registry lock: both take milliseconds or more. */
#include "runner/sandboxes.h"
#include "runner/sandboxes_int.h"
#include "runner/egress.h"
#include "runner/fuse.h"
#include "core/log.h"
#include "core/util.h"
#include "deploy/deploy.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct retired {
	char image[1024];
	struct retired *next;
};

/* Spares: after an ephemeral call the runner builds the agent's next
 * ephemeral sandbox (pool take + /app mount, ~1 ms) once the answer is out,
 * so the next call finds it ready. One per agent, a few in all, each kept
 * for a minute of disuse: a spare holds a sandbox slot. */
#define MAX_SPARES 8
#define SPARE_IDLE_MS 60000

/* At the host's sandbox budget a call takes the room of the session sandbox
 * idle longest, once it has been idle this long (a conversation that goes on
 * keeps its sandbox); the session expires early, as if reaped, and its next
 * call starts it anew. Without this, sessions idle for up to an hour would
 * hold the budget while calls are refused. session_give_way_seconds (60). */
static int64_t give_way_ms = 60000;
#define MAX_EVICTED 64

/* When nothing can give way, a call waits this long for room before its 503:
 * calls end in about a second, so a burst a little over the budget is served
 * late rather than refused. */
#define ADMIT_WAIT_MS 3000
#define ADMIT_POLL_MS 100

pthread_mutex_t ah_sbx_mu = PTHREAD_MUTEX_INITIALIZER;
struct ah_sbx_entry *ah_sbx_entries;
static struct retired *retired_images;
/* Sessions that gave way, for the next reap to expire (it has the database). */
static struct { char agent_id[33], session[129]; } evicted[MAX_EVICTED];
static int nevicted;

void ah_sandboxes_init(int64_t session_give_way_ms)
{
	give_way_ms = session_give_way_ms;
	ah_sbx_entries = NULL;
	retired_images = NULL;
}

static bool image_in_use(const char *image)
{
	for (struct ah_sbx_entry *e = ah_sbx_entries; e; e = e->next)
		if (strcmp(e->image, image) == 0)
			return true;
	return false;
}

/* Unlinks e (lock held) and returns retired images no longer used, to remove. */
static struct retired *unlink_entry(struct ah_sbx_entry *e)
{
	for (struct ah_sbx_entry **p = &ah_sbx_entries; *p; p = &(*p)->next)
		if (*p == e) {
			*p = e->next;
			break;
		}
	struct retired *gone = NULL;
	for (struct retired **p = &retired_images; *p;) {
		if (image_in_use((*p)->image)) {
			p = &(*p)->next;
			continue;
		}
		struct retired *r = *p;
		*p = r->next;
		r->next = gone;
		gone = r;
	}
	return gone;
}

static void remove_images(struct retired *gone)
{
	while (gone) {
		struct retired *n = gone->next;
		ah_log_info("removing retired image %s", gone->image);
		ah_deploy_rmtree(gone->image);
		char plan[sizeof(gone->image) + 16];
		snprintf(plan, sizeof(plan), "%s.mounts", gone->image); /* see fuse.h */
		unlink(plan);
		ah_deps_forget(gone->image); /* see deploy/reuse.c */
		if (ah_image_store_of(gone->image, plan, sizeof(plan)) == 0)
			ah_image_store_sweep(plan); /* files no other image links */
		free(gone);
		gone = n;
	}
}

static void destroy_entry(struct ah_sbx_entry *e)
{
	if (e->sb && e->state == AH_SBX_WARM_DIED) { /* why it died: its stderr, into the log */
		char tag[64];
		snprintf(tag, sizeof tag, "warm agent=%s", e->agent_id);
		ah_sandbox_exec_cancel(e->sb, tag);
	}
	if (e->sb) {
		ah_log_info("sandbox %s destroyed (agent=%s%s%s)", ah_sandbox_id(e->sb), e->agent_id,
		            e->session[0] ? " session=" : "", e->session);
		ah_sandbox_destroy(e->sb);
	}
	pthread_mutex_destroy(&e->run_mu);
	free(e);
}

/* Destroys every doomed entry nobody holds, outside the lock. */
void ah_sbx_sweep(void)
{
	struct ah_sbx_entry *dead = NULL;
	struct retired *gone = NULL;
	ah_sbx_lock();
	for (struct ah_sbx_entry *e = ah_sbx_entries, *next; e; e = next) {
		next = e->next;
		if (!e->doomed || e->refs > 0)
			continue;
		for (struct retired *g = unlink_entry(e), *gn; g; g = gn) {
			gn = g->next;
			g->next = gone;
			gone = g;
		}
		e->next = dead;
		dead = e;
	}
	ah_sbx_unlock();
	for (struct ah_sbx_entry *e = dead, *next; e; e = next) {
		next = e->next;
		destroy_entry(e);
	}
	remove_images(gone);
}

struct ah_sbx_entry *ah_sbx_new_entry(const char *agent_id, const char *session, const char *image,
                                      enum ah_sbx_state state)
{
	struct ah_sbx_entry *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	snprintf(e->agent_id, sizeof(e->agent_id), "%s", agent_id);
	snprintf(e->session, sizeof(e->session), "%s", session ? session : "");
	snprintf(e->image, sizeof(e->image), "%s", image);
	pthread_mutex_init(&e->run_mu, NULL);
	e->last_used_ms = ah_now_ms();
	ah_sbx_set_state(e, state);
	e->next = ah_sbx_entries;
	ah_sbx_entries = e;
	return e;
}

/* Lock held. The live entry of a session, dooming one over an older image. */
static struct ah_sbx_entry *find_session(const char *agent_id, const char *session,
                                         const char *image)
{
	for (struct ah_sbx_entry *e = ah_sbx_entries; e; e = e->next) {
		if (e->doomed || !ah_sbx_is_session(e) || strcmp(e->agent_id, agent_id) != 0 ||
		    strcmp(e->session, session) != 0)
			continue;
		if (strcmp(e->image, image) == 0)
			return e;
		e->doomed = true; /* redeployed: the old state is gone, as the contract says */
	}
	return NULL;
}

/* Lock held. The agent's ready spare over image, now an ordinary ephemeral
 * entry; a spare over an older image is doomed. */
static struct ah_sbx_entry *take_spare(const char *agent_id, const char *image)
{
	for (struct ah_sbx_entry *e = ah_sbx_entries; e; e = e->next) {
		if (e->state != AH_SBX_SPARE || e->doomed || strcmp(e->agent_id, agent_id) != 0)
			continue;
		if (strcmp(e->image, image) != 0)
			e->doomed = true;
		else if (e->sb && e->refs == 0) {
			ah_sbx_set_state(e, AH_SBX_EPHEMERAL);
			return e;
		}
	}
	return NULL;
}

/* The host is at its sandbox budget: the spares nobody uses, built for calls
 * that have not come, give theirs to the call that has. Their budget is
 * free when this returns (ah_sandbox_destroy). */
static void drop_spares(void)
{
	ah_sbx_lock();
	for (struct ah_sbx_entry *e = ah_sbx_entries; e; e = e->next)
		if (ah_sbx_is_spare(e) && e->refs == 0 && e->sb)
			e->doomed = true;
	ah_sbx_unlock();
	ah_sbx_sweep();
}

/* The host is at its budget and the spares are gone: the session sandbox
 * idle longest (past give_way_ms) gives way. False when none may. */
static bool evict_idle_session(void)
{
	int64_t cutoff = ah_now_ms() - give_way_ms;
	struct ah_sbx_entry *lru = NULL;
	ah_sbx_lock();
	for (struct ah_sbx_entry *e = ah_sbx_entries; e; e = e->next)
		if (ah_sbx_is_session(e) && e->sb && e->refs == 0 && !e->doomed && e->last_used_ms < cutoff &&
		    (!lru || e->last_used_ms < lru->last_used_ms))
			lru = e;
	if (lru) {
		lru->doomed = true;
		ah_log_info("agent=%s session=%s: idle sandbox gives way to a call (host at its "
		            "sandbox budget)", lru->agent_id, lru->session);
		if (nevicted < MAX_EVICTED) {
			memcpy(evicted[nevicted].agent_id, lru->agent_id, sizeof(lru->agent_id));
			memcpy(evicted[nevicted].session, lru->session, sizeof(lru->session));
			nevicted++;
		}
	}
	ah_sbx_unlock();
	if (lru)
		ah_sbx_sweep(); /* its budget is free when this returns */
	return lru != NULL;
}

/* Room for one more at the budget: the spares go first (even when a
 * concurrent call dropped them: their budget is free then), then idle
 * sessions give way one at a time, then the call waits a little for calls
 * that end. False when there is nothing left to try. */
static bool make_room(int attempt, int64_t give_up_ms)
{
	if (attempt == 0) {
		drop_spares();
		return true;
	}
	if (attempt <= MAX_EVICTED && evict_idle_session())
		return true;
	if (ah_now_ms() >= give_up_ms)
		return false;
	nanosleep(&(struct timespec){ 0, ADMIT_POLL_MS * 1000000L }, NULL);
	return true;
}

/* A pooled sandbox can go bad while it waits: one more try is cheap. At the
 * budget (AH_EBUSY), make_room decides how long to go on. */
static int create_admitted(struct ah_sbx_entry *e, const ah_sandbox_spec *spec, ah_err *err)
{
	int64_t give_up_ms = ah_now_ms() + ADMIT_WAIT_MS;
	int failures = 0;
	for (int attempt = 0;; attempt++) {
		int rc = ah_sandbox_create(&e->sb, spec, err);
		if (rc == 0)
			return 0;
		e->sb = NULL;
		if (rc == AH_EBUSY ? !make_room(attempt, give_up_ms) : ++failures > 1)
			return rc;
	}
}

int ah_sandboxes_acquire(struct ah_sbx_lease *out, const char *agent_id, const char *session,
                         const char *image, ah_err *err)
{
	ah_sbx_lock();
	struct ah_sbx_entry *e = session ? find_session(agent_id, session, image)
	                                 : take_spare(agent_id, image);
	if (!e)
		e = ah_sbx_new_entry(agent_id, session, image,
		                     session && *session ? AH_SBX_SESSION : AH_SBX_EPHEMERAL);
	if (e)
		e->refs++;
	ah_sbx_unlock();
	ah_sbx_sweep(); /* a session's sandbox over an older image was just doomed */
	if (!e)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	ah_lock(&e->run_mu, AH_LOCK_RUN);
	int rc = 0;
	ah_sandbox_bind *binds = NULL;
	size_t nbinds = 0;
	/* Bucket mounts (fuse.h): served before a sandbox is made with them, and
	 * still served before a call in one that has them. */
	if (e->sb)
		rc = ah_fuse_check(agent_id, image, err);
	else
		rc = ah_fuse_binds(agent_id, image, AH_FUSE_FOR_CALL, &binds, &nbinds, err);
	ah_sandbox_egress *eg = NULL;
	if (!e->sb && rc == 0) {
		ah_sandbox_spec spec = {.image_dir = image, .binds = binds, .nbinds = nbinds};
		rc = ah_egress_spec(agent_id, &spec, &eg, err);
		if (rc == 0)
			rc = create_admitted(e, &spec, err);
	}
	free(eg);
	ah_fuse_binds_free(binds, nbinds);
	out->entry = e;
	out->sb = e->sb;
	if (rc != 0) {
		ah_sandboxes_release(out, true);
		out->entry = NULL;
	}
	return rc;
}

/* Builds the agent's spare over image, unless it has one (or too many agents
 * do): pool take + /app mount, ~1 ms. */
static void build_spare(const char *agent_id, const char *image)
{
	int spares = 0;
	bool have = false;
	ah_sbx_lock();
	for (struct ah_sbx_entry *e = ah_sbx_entries; e; e = e->next)
		if (e->state == AH_SBX_SPARE && !e->doomed) {
			spares++;
			have |= strcmp(e->agent_id, agent_id) == 0 && strcmp(e->image, image) == 0;
		}
	struct ah_sbx_entry *e = !have && spares < MAX_SPARES
	                         ? ah_sbx_new_entry(agent_id, NULL, image, AH_SBX_SPARE) : NULL;
	if (e)
		e->refs = 1; /* building: neither taken nor swept */
	ah_sbx_unlock();
	if (!e)
		return;
	ah_sandbox_bind *binds = NULL;
	size_t nbinds = 0;
	ah_sandbox *sb = NULL;
	ah_err err = {0};
	ah_sandbox_egress *eg = NULL;
	int rc = ah_fuse_binds(agent_id, image, AH_FUSE_FOR_SPARE, &binds, &nbinds, &err);
	if (rc == 0) {
		ah_sandbox_spec spec = {.image_dir = image, .ahead = true, .binds = binds,
		                        .nbinds = nbinds};
		rc = ah_egress_spec(agent_id, &spec, &eg, &err);
		if (rc == 0)
			rc = ah_sandbox_create(&sb, &spec, &err);
	}
	free(eg);
	ah_fuse_binds_free(binds, nbinds);
	ah_sbx_lock();
	e->sb = rc == 0 ? sb : NULL;
	e->refs--;
	e->last_used_ms = ah_now_ms();
	if (rc != 0)
		e->doomed = true;
	ah_sbx_unlock();
	if (rc != 0)
		ah_log_warn("agent=%s: no spare sandbox: %s", agent_id, err.msg);
	ah_sbx_sweep(); /* failed, or doomed meanwhile (destroy_agent) */
}

void ah_sandboxes_release(struct ah_sbx_lease *lease, bool broken)
{
	struct ah_sbx_entry *e = lease->entry;
	if (!e)
		return;
	lease->entry = NULL;
	ah_unlock(&e->run_mu, AH_LOCK_RUN);
	char agent_id[sizeof e->agent_id], image[sizeof e->image];
	ah_sbx_lock();
	e->refs--;
	e->last_used_ms = ah_now_ms();
	bool respare = !broken && !ah_sbx_is_session(e) && e->sb;
	if (respare) { /* e may be gone once the lock is let go */
		memcpy(agent_id, e->agent_id, sizeof agent_id);
		memcpy(image, e->image, sizeof image);
	}
	if (broken || !ah_sbx_is_session(e) || !e->sb)
		e->doomed = true;
	ah_sbx_unlock();
	ah_sbx_sweep();
	if (respare)
		build_spare(agent_id, image);
}

/* Dooms the ah_sbx_entries matching (agent or NULL, session or NULL); the unused ones
 * go at once, the others at their last release. */
static int destroy_matching(const char *agent_id, const char *session)
{
	int n = 0;
	ah_sbx_lock();
	for (struct ah_sbx_entry *e = ah_sbx_entries; e; e = e->next) {
		if ((agent_id && strcmp(e->agent_id, agent_id) != 0) ||
		    (session && strcmp(e->session, session) != 0) || e->doomed)
			continue;
		e->doomed = true;
		n += e->sb != NULL;
	}
	ah_sbx_unlock();
	ah_sbx_sweep();
	return n;
}

int ah_sandboxes_destroy_session(const char *agent_id, const char *session)
{
	return destroy_matching(agent_id, session);
}

int ah_sandboxes_destroy_agent(const char *agent_id)
{
	return destroy_matching(agent_id, NULL);
}

void ah_sandboxes_destroy_all(void)
{
	destroy_matching(NULL, NULL);
}

size_t ah_sandboxes_agent_count(const char *agent_id)
{
	size_t n = 0;
	ah_sbx_lock();
	for (struct ah_sbx_entry *e = ah_sbx_entries; e; e = e->next)
		n += strcmp(e->agent_id, agent_id) == 0;
	ah_sbx_unlock();
	return n;
}

size_t ah_sandboxes_count(void)
{
	size_t n = 0;
	ah_sbx_lock();
	for (struct ah_sbx_entry *e = ah_sbx_entries; e; e = e->next)
		n += e->sb != NULL;
	ah_sbx_unlock();
	return n;
}

/* Lock held. */
static bool live_session(const char *agent_id, const char *session)
{
	for (struct ah_sbx_entry *e = ah_sbx_entries; e; e = e->next)
		if (!e->doomed && strcmp(e->session, session) == 0 && strcmp(e->agent_id, agent_id) == 0)
			return true;
	return false;
}

int ah_sandboxes_reap_idle(int64_t idle_ms, ah_sbx_reaped_fn fn, void *ctx)
{
	enum { BATCH = 64 };
	char agents[BATCH][33], sessions[BATCH][129];
	int64_t now = ah_now_ms(), cutoff = now - idle_ms;
	int n = 0;
	ah_sbx_lock();
	for (struct ah_sbx_entry *e = ah_sbx_entries; e && n < BATCH; e = e->next) {
		if (e->state == AH_SBX_SPARE && e->refs == 0 && e->last_used_ms < now - SPARE_IDLE_MS)
			e->doomed = true;
		if (e->refs > 0 || e->doomed || !ah_sbx_is_session(e) || e->last_used_ms > cutoff)
			continue;
		e->doomed = true;
		memcpy(agents[n], e->agent_id, sizeof(agents[n]));
		memcpy(sessions[n], e->session, sizeof(sessions[n]));
		n++;
	}
	/* Sessions that gave way to a call: expired too, unless a later call of
	 * theirs already made a new sandbox (the row stays active then). */
	for (int i = 0; i < nevicted && n < BATCH; i++) {
		if (live_session(evicted[i].agent_id, evicted[i].session))
			continue;
		memcpy(agents[n], evicted[i].agent_id, sizeof(agents[n]));
		memcpy(sessions[n], evicted[i].session, sizeof(sessions[n]));
		n++;
	}
	nevicted = 0;
	ah_sbx_unlock();
	ah_sbx_sweep();
	for (int i = 0; i < n && fn; i++)
		fn(agents[i], sessions[i], ctx);
	return n;
}

void ah_sandboxes_retire_image(const char *image)
{
	if (!image || !*image)
		return;
	ah_sbx_lock();
	bool used = image_in_use(image);
	struct retired *r = used ? calloc(1, sizeof(*r)) : NULL;
	if (r) {
		snprintf(r->image, sizeof(r->image), "%s", image);
		r->next = retired_images;
		retired_images = r;
	}
	ah_sbx_unlock();
	if (!used) {
		ah_log_info("removing retired image %s", image);
		ah_deploy_rmtree(image);
	}
}

