/* Pool: sandboxes built ahead of time by background threads, so that create
 * only claims one (mounts /app) and exec only costs a fork/exec.
 *
 * Size: at least sandbox_pool_size, and after a burst as many as were in use
 * at once recently (the peak, held for PEAK_HOLD_MS, capped by
 * sandbox_pool_max), so that the next burst of the same size finds them all
 * ready instead of waiting for one build after another. Concurrency is
 * counted over young sandboxes only (taken less than YOUNG_MS ago and not yet
 * destroyed), so long-lived session sandboxes do not inflate the pool.
 *
 * Threads: NBUILDERS long-lived builders and one reaper. Builders live as long
 * as the pool on purpose: PR_SET_PDEATHSIG fires when the *thread* that
 * created a process exits, so keepers made by short-lived request threads
 * would die with them. Refills and teardowns run as SCHED_IDLE so that they
 * do not take the CPU from agents running right now, and a refill first waits
 * for a moment when none runs (SCHED_IDLE alone still let builds take kernel
 * locks the running calls' sandboxes needed); a build somebody is waiting for
 * runs at once, at normal priority. create() with an empty pool waits for
 * a builder (which then builds past the target for each waiter); a build
 * failure wakes the waiters with the error rather than retrying forever.
 * The reaper tears destroyed sandboxes down (their processes are already
 * dead; the rest is mostly RCU waits) apart from the builders, so teardowns
 * never delay a refill; it also shrinks the pool once a peak has expired.
 * stop drains both, so shutdown leaves nothing. */
#include "sandbox/internal.h"

#include "core/log.h"
#include "core/util.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NBUILDERS 2
#define YOUNG_MS 10000        /* a take counts towards concurrency this long */
#define PEAK_HOLD_MS 60000    /* the pool stays grown this long after a peak */
#define NLIVE 64              /* young takes tracked */

/* A sandbox unlike the pooled ones (another disk size), built on request. */
typedef struct order {
	long long disk_bytes;
	struct ah_sandbox *sb;
	ah_err err;
	int rc;
	bool done;
	struct order *next;
} order;

/* One take from the pool, until its sandbox is destroyed. */
typedef struct live {
	const struct ah_sandbox *sb;
	long long ms;
} live;

static struct {
	pthread_mutex_t mu;
	pthread_cond_t wake;     /* to the builders */
	pthread_cond_t reap_cv;  /* to the reaper */
	pthread_cond_t ready_cv; /* to waiters in take */
	struct ah_sandbox *ready;
	struct ah_sandbox *retired;
	order *orders;
	int nready, nbuilding, waiters;
	int nahead;              /* of nbuilding: refills started while nobody waited */
	bool stop, running;
	unsigned fail_gen;
	ah_err fail;
	int failures;
	live live[NLIVE];
	int peak;
	long long peak_ms;
	pthread_t builders[NBUILDERS], reaper;
	int nbuilders;
} P = { .mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
        .reap_cv = PTHREAD_COND_INITIALIZER, .ready_cv = PTHREAD_COND_INITIALIZER };

/* ---- demand (lock held) ---- */

/* How many sandboxes the pool should hold ready when nobody waits. */
static int target(void)
{
	int t = P.peak;
	if (sb_mono_ms() - P.peak_ms > PEAK_HOLD_MS)
		t = 0;
	if (t > sb_g.pool_max)
		t = sb_g.pool_max;
	return t > sb_g.pool_size ? t : sb_g.pool_size;
}

/* Records a take and raises the peak to the young sandboxes alive now. */
static void note_take(const struct ah_sandbox *sb)
{
	long long now = sb_mono_ms();
	int young = 1, slot = -1, oldest = 0;
	for (int i = 0; i < NLIVE; i++) {
		bool is_young = P.live[i].sb && now - P.live[i].ms < YOUNG_MS;
		young += is_young;
		if (!is_young && slot < 0)
			slot = i;
		if (P.live[i].ms < P.live[oldest].ms)
			oldest = i;
	}
	P.live[slot >= 0 ? slot : oldest] = (live){ sb, now };
	if (young >= P.peak || now - P.peak_ms > PEAK_HOLD_MS) {
		P.peak = young;
		P.peak_ms = now;
	}
}

static void note_retire(const struct ah_sandbox *sb)
{
	for (int i = 0; i < NLIVE; i++)
		if (P.live[i].sb == sb)
			P.live[i].sb = NULL;
}

static bool want_more(void)
{
	return !P.stop && P.nready + P.nbuilding < target() + P.waiters &&
	       P.nready + P.nbuilding < sb_g.max_slots;
}

/* ---- builders ---- */

/* Per thread on Linux. Work nobody waits for (refills, teardowns) runs as
 * SCHED_IDLE: it takes only CPU time that nothing else wants, so it never
 * slows the agents running right now, however many cores they keep busy.
 * A build somebody is waiting for runs normally. The keeper gets the normal
 * policy back in keeper_spawn. */
void ah_sandbox_background(bool on)
{
	struct sched_param sp = { 0 };
	sched_setscheduler((pid_t)syscall(SYS_gettid), on ? SCHED_IDLE : SCHED_OTHER, &sp);
	if (!on)
		setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 0);
}

static void backoff(void)
{
	/* Only while nobody waits: a waiter gets the error at once instead. */
	struct timespec ts = ah_deadline_in_ms(P.failures < 5 ? 1000 : 5000);
	while (!P.stop && P.waiters == 0)
		if (pthread_cond_timedwait(&P.wake, &P.mu, &ts) != 0)
			break;
}

/* The host is at its budget (budget.c) and somebody waits: a pooled
 * sandbox, made for a call that has not come, gives its budget back for the
 * one that has (lock held). False if the pool holds none. */
static bool evict_ready(void)
{
	struct ah_sandbox *sb = P.ready;
	if (!sb)
		return false;
	P.ready = sb->next;
	P.nready--;
	sb_release_budget(sb);
	sb->next = P.retired;
	P.retired = sb;
	pthread_cond_signal(&P.reap_cv);
	return true;
}

static void fill_order(order *o)
{
	pthread_mutex_unlock(&P.mu);
	ah_sandbox_background(false);
	o->rc = sb_build(&o->sb, o->disk_bytes, false, &o->err);
	pthread_mutex_lock(&P.mu);
	if (o->rc == AH_EBUSY && evict_ready()) {
		pthread_mutex_unlock(&P.mu);
		o->rc = sb_build(&o->sb, o->disk_bytes, false, &o->err);
		pthread_mutex_lock(&P.mu);
	}
	o->done = true;
	pthread_cond_broadcast(&P.ready_cv);
}

static void build_one(void)
{
	P.nbuilding++;
	bool urgent = P.waiters > 0;
	P.nahead += !urgent;
	pthread_mutex_unlock(&P.mu);
	ah_sandbox_background(!urgent);
	struct ah_sandbox *sb = NULL;
	ah_err err = { 0 };
	int rc = sb_build(&sb, 0, !urgent, &err);
	pthread_mutex_lock(&P.mu);
	P.nbuilding--;
	P.nahead -= !urgent;
	if (rc == 0) {
		sb->next = P.ready;
		P.ready = sb;
		P.nready++;
		P.failures = 0;
	} else if (rc == AH_EBUSY && !urgent) {
		/* A refill past the budget's headroom: not an error for a waiter
		 * that came meanwhile, whose own build may still fit. */
		P.failures++;
	} else {
		P.fail = err;
		P.fail_gen++;
		P.failures++;
	}
	pthread_cond_broadcast(&P.ready_cv);
	if (rc != 0)
		backoff();
}

/* A refill nobody waits for yet waits for a quiet moment (as
 * ah_sandbox_wait_quiet), or until somebody does wait (lock held). */
static void wait_quiet(void)
{
	long long give_up = sb_mono_ms() + SB_QUIET_MAX_MS, wait, left;
	while (!P.stop && P.waiters == 0 && (wait = sb_exec_quiet_in_ms()) > 0 &&
	       (left = give_up - sb_mono_ms()) > 0) {
		struct timespec ts = ah_deadline_in_ms(wait < left ? wait : left);
		pthread_cond_timedwait(&P.wake, &P.mu, &ts);
	}
}

static void *builder_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&P.mu);
	while (!P.stop) {
		if (P.orders) {
			order *o = P.orders;
			P.orders = o->next;
			fill_order(o);
		} else if (want_more()) {
			wait_quiet();
			if (want_more())
				build_one();
		} else {
			pthread_cond_wait(&P.wake, &P.mu);
		}
	}
	pthread_mutex_unlock(&P.mu);
	return NULL;
}

/* ---- reaper ---- */

/* A peak has expired: the sandboxes past the target go (lock held). */
static void shrink(void)
{
	int extra = P.nready - target();
	while (extra-- > 0 && P.ready && P.waiters == 0) {
		struct ah_sandbox *sb = P.ready;
		P.ready = sb->next;
		P.nready--;
		sb->next = P.retired;
		P.retired = sb;
	}
}

static void *reaper_main(void *arg)
{
	(void)arg;
	ah_sandbox_background(true);
	pthread_mutex_lock(&P.mu);
	while (!P.stop || P.retired) {
		if (P.retired) {
			struct ah_sandbox *sb = P.retired;
			P.retired = sb->next;
			pthread_mutex_unlock(&P.mu);
			sb_teardown(sb);
			pthread_mutex_lock(&P.mu);
			continue;
		}
		shrink();
		if (P.retired)
			continue;
		struct timespec ts = ah_deadline_in_ms(5000);
		pthread_cond_timedwait(&P.reap_cv, &P.mu, &ts);
	}
	pthread_mutex_unlock(&P.mu);
	return NULL;
}

/* ---- API ---- */

static void stop_threads(void)
{
	pthread_mutex_lock(&P.mu);
	P.stop = true;
	pthread_cond_broadcast(&P.wake);
	pthread_cond_broadcast(&P.reap_cv);
	pthread_cond_broadcast(&P.ready_cv);
	pthread_mutex_unlock(&P.mu);
	for (int i = 0; i < P.nbuilders; i++)
		pthread_join(P.builders[i], NULL);
	P.nbuilders = 0;
}

int sb_pool_start(ah_err *err)
{
	P.stop = false;
	P.peak = 0;
	P.peak_ms = sb_mono_ms() - PEAK_HOLD_MS - 1;
	memset(P.live, 0, sizeof P.live);
	if (pthread_create(&P.reaper, NULL, reaper_main, NULL) != 0)
		return ah_err_set(err, AH_EFAIL, "cannot start the sandbox reaper thread");
	for (; P.nbuilders < NBUILDERS; P.nbuilders++)
		if (pthread_create(&P.builders[P.nbuilders], NULL, builder_main, NULL) != 0) {
			stop_threads();
			pthread_join(P.reaper, NULL);
			return ah_err_set(err, AH_EFAIL, "cannot start the sandbox pool threads");
		}
	P.running = true;
	return 0;
}

static int take_custom(struct ah_sandbox **out, long long disk_bytes, ah_err *err)
{
	order o = { .disk_bytes = disk_bytes };
	pthread_mutex_lock(&P.mu);
	o.next = P.orders;
	P.orders = &o;
	pthread_cond_signal(&P.wake);
	while (!o.done && !P.stop)
		pthread_cond_wait(&P.ready_cv, &P.mu);
	if (!o.done) { /* stopping: the order was never taken */
		for (order **pp = &P.orders; *pp; pp = &(*pp)->next)
			if (*pp == &o) {
				*pp = o.next;
				break;
			}
		pthread_mutex_unlock(&P.mu);
		return ah_err_set(err, AH_EFAIL, "sandboxes are shutting down");
	}
	pthread_mutex_unlock(&P.mu);
	if (o.rc && err)
		*err = o.err;
	*out = o.sb;
	return o.rc;
}

int sb_pool_take(struct ah_sandbox **out, long long disk_bytes, bool counted, ah_err *err)
{
	if (disk_bytes > 0 && disk_bytes != sb_g.disk_bytes)
		return take_custom(out, disk_bytes, err);
	pthread_mutex_lock(&P.mu);
	unsigned gen = P.fail_gen;
	P.waiters++;
	pthread_cond_signal(&P.wake);
	/* A build refused for the budget is no answer yet while refills
	 * started earlier are under way: they were admitted, or are being, and
	 * come here when ready (every build's end wakes the waiters). */
	while (!P.ready && !P.stop &&
	       (P.fail_gen == gen || (P.fail.code == AH_EBUSY && P.nahead > 0)))
		pthread_cond_wait(&P.ready_cv, &P.mu);
	P.waiters--;
	struct ah_sandbox *sb = P.ready;
	if (sb) {
		P.ready = sb->next;
		P.nready--;
		sb->next = NULL;
		if (counted)
			note_take(sb);
		/* Refill: the peak may just have grown, wake every builder. */
		pthread_cond_broadcast(&P.wake);
	}
	ah_err fail = P.fail;
	pthread_mutex_unlock(&P.mu);
	if (sb) {
		*out = sb;
		return 0;
	}
	if (err)
		*err = fail;
	return fail.code ? fail.code : AH_EFAIL;
}

void ah_sandbox_done(const struct ah_sandbox *sb)
{
	pthread_mutex_lock(&P.mu);
	note_retire(sb);
	pthread_mutex_unlock(&P.mu);
}

void sb_pool_retire(struct ah_sandbox *sb)
{
	pthread_mutex_lock(&P.mu);
	note_retire(sb);
	if (!P.running) {
		pthread_mutex_unlock(&P.mu);
		sb_teardown(sb);
		return;
	}
	sb->next = P.retired;
	P.retired = sb;
	pthread_cond_signal(&P.reap_cv);
	pthread_mutex_unlock(&P.mu);
}

void sb_pool_stop(void)
{
	if (!P.running)
		return;
	stop_threads();
	pthread_join(P.reaper, NULL);
	pthread_mutex_lock(&P.mu);
	P.running = false; /* from now on retire tears down at once */
	struct ah_sandbox *left = P.retired, *ready = P.ready;
	P.retired = P.ready = NULL;
	P.nready = 0;
	pthread_mutex_unlock(&P.mu);
	/* Retired after the reaper's last look, then the unused ones. */
	for (struct ah_sandbox *lists[2] = { left, ready }, *sb; lists[0] || lists[1];) {
		int i = lists[0] ? 0 : 1;
		sb = lists[i];
		lists[i] = sb->next;
		sb_teardown(sb);
	}
}
