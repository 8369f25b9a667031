/* See lease.h. One process-shared robust mutex guards the whole table: the
 * critical sections are a hash probe and a few stores, never a database call,
 * so a single lock costs less than anything finer. */
#include "ratelimit/lease.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define MAX_PROBE 32
#define REFILL_STALE 5  /* seconds after which a refill whose worker vanished is forgotten */

struct slot {
	long long window;       /* 0: never used; an older window than asked: reusable */
	long long reserved;     /* highest global count this host saw for the window */
	long long pool;         /* reserved by this host, not yet handed out */
	long long refill_since; /* a worker is reserving a chunk since then (0: none) */
	bool exhausted;         /* the database granted nothing more this window */
	char key[AH_RL_KEY_MAX];
};

struct ah_rl_table {
	pthread_mutex_t mu;
	size_t bytes;
	unsigned nslots;
	struct slot slots[];
};

long long ah_rl_window(long long now)
{
	return now - now % AH_RL_WINDOW;
}

long long ah_rl_chunk(long long limit, long long reserved)
{
	long long c = (limit - reserved) / AH_RL_SHARE;
	if (c < 1)
		return 1;
	return c > AH_RL_CHUNK_MAX ? AH_RL_CHUNK_MAX : c;
}

long long ah_rl_granted(long long limit, long long old, long long asked)
{
	long long left = limit - old;
	if (left <= 0)
		return 0;
	return asked < left ? asked : left;
}

ah_rl_table *ah_rl_table_new(unsigned nslots)
{
	size_t bytes = sizeof(ah_rl_table) + (size_t)nslots * sizeof(struct slot);
	ah_rl_table *t = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED)
		return NULL;
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	/* A worker killed inside the lock must not wedge every other worker. */
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	int rc = pthread_mutex_init(&t->mu, &a);
	pthread_mutexattr_destroy(&a);
	if (rc != 0) {
		munmap(t, bytes);
		return NULL;
	}
	t->bytes = bytes;
	t->nslots = nslots;
	return t;
}

void ah_rl_table_free(ah_rl_table *t)
{
	if (!t)
		return;
	pthread_mutex_destroy(&t->mu);
	munmap(t, t->bytes);
}

static bool lock(ah_rl_table *t)
{
	int rc = pthread_mutex_lock(&t->mu);
	if (rc == EOWNERDEAD) {
		/* The dead owner left at most one slot half-updated: a count that is
		 * off by a few tokens, still bounded by the database row. */
		pthread_mutex_consistent(&t->mu);
		return true;
	}
	return rc == 0;
}

static uint64_t hash(const char *key, long long window)
{
	uint64_t h = 1469598103934665603ull;
	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return (h ^ (uint64_t)window) * 1099511628211ull;
}

/* The slot of (key, window); with create, claims a free or outdated one.
 * Slots never return to "never used", so a probe may stop at the first one. */
static struct slot *find(ah_rl_table *t, const char *key, long long window, bool create)
{
	uint64_t h = hash(key, window);
	struct slot *spare = NULL;
	for (unsigned k = 0; k < MAX_PROBE && k < t->nslots; k++) {
		struct slot *s = &t->slots[(h + k) % t->nslots];
		if (s->window == window && strcmp(s->key, key) == 0)
			return s;
		if (s->window < window && !spare)
			spare = s;
		if (s->window == 0)
			break;
	}
	if (!create || !spare)
		return NULL;
	memset(spare, 0, sizeof(*spare));
	spare->window = window;
	memcpy(spare->key, key, strlen(key) + 1);
	return spare;
}

static long long remaining(const struct slot *s, long long limit)
{
	long long r = limit - (s->reserved - s->pool);
	return r < 0 ? 0 : r;
}

/* Decides under the lock; the caller has found or made the slot. */
static enum ah_rl_verdict take_locked(struct slot *s, long long now, long long limit,
                                      ah_rl_ticket *out)
{
	bool refilling = s->refill_since && now - s->refill_since < REFILL_STALE;
	long long chunk = ah_rl_chunk(limit, s->reserved);
	if (s->pool > 0) {
		s->pool--;
		out->remaining = remaining(s, limit);
		if (!s->exhausted && !refilling && chunk > 1 && s->pool < chunk / 2) {
			s->refill_since = now;
			out->prefetch = true;
			out->chunk = chunk;
		}
		return AH_RL_TAKEN;
	}
	if (s->exhausted) {
		out->remaining = 0;
		return AH_RL_OVER;
	}
	/* While another worker fetches a chunk, reserve just our own token. */
	out->chunk = refilling ? 1 : chunk;
	if (!refilling && chunk > 1)
		s->refill_since = now;
	return AH_RL_RESERVE;
}

enum ah_rl_verdict ah_rl_take(ah_rl_table *t, const char *key, long long now, long long limit,
                              ah_rl_ticket *out)
{
	memset(out, 0, sizeof(*out));
	out->window = ah_rl_window(now);
	out->chunk = 1;
	if (!t || strlen(key) >= AH_RL_KEY_MAX || !lock(t))
		return AH_RL_NOSLOT;
	struct slot *s = find(t, key, out->window, true);
	enum ah_rl_verdict v = s ? take_locked(s, now, limit, out) : AH_RL_NOSLOT;
	pthread_mutex_unlock(&t->mu);
	return v;
}

long long ah_rl_peek(ah_rl_table *t, const char *key, long long now, long long limit)
{
	if (!t || strlen(key) >= AH_RL_KEY_MAX || !lock(t))
		return limit;
	struct slot *s = find(t, key, ah_rl_window(now), false);
	long long left = s ? remaining(s, limit) : limit;
	pthread_mutex_unlock(&t->mu);
	return left;
}

/* Books the grant into the slot (which may be gone: the window turned over or
 * the slot was reused; then only the caller's own token counts). */
static enum ah_rl_verdict settle_locked(struct slot *s, long long limit, long long granted,
                                        long long total, bool consume, ah_rl_ticket *tk)
{
	bool mine = consume && granted > 0;
	if (s) {
		if (total > s->reserved)
			s->reserved = total;
		if (s->reserved >= limit)
			s->exhausted = true;
		s->pool += granted - (mine ? 1 : 0);
		if (tk->chunk > 1)
			s->refill_since = 0;
		/* A concurrent refill may have filled the pool while we asked. */
		if (consume && !mine && s->pool > 0) {
			s->pool--;
			mine = true;
		}
		tk->remaining = remaining(s, limit);
	} else {
		tk->remaining = limit - total < 0 ? 0 : limit - total;
	}
	if (!consume)
		return AH_RL_TAKEN;
	if (!mine)
		tk->remaining = 0;
	return mine ? AH_RL_TAKEN : AH_RL_OVER;
}

enum ah_rl_verdict ah_rl_settle(ah_rl_table *t, const char *key, long long limit,
                                long long granted, long long total, bool consume,
                                ah_rl_ticket *tk)
{
	bool locked = t && strlen(key) < AH_RL_KEY_MAX && lock(t);
	struct slot *s = locked ? find(t, key, tk->window, false) : NULL;
	enum ah_rl_verdict v = settle_locked(s, limit, granted, total, consume, tk);
	if (locked)
		pthread_mutex_unlock(&t->mu);
	return v;
}
