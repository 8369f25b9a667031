/* Pool: sandboxes built ahead of time by one background thread, so that
 * create only claims one (mounts /app) and exec only costs a fork/exec.
 *
 * One thread builds every keeper on purpose: PR_SET_PDEATHSIG fires when the
 * *thread* that created the process exits, so keepers made by short-lived
 * request threads would die with them. create() with an empty pool waits for
 * the thread (which then builds even past pool_size for each waiter); a build
 * failure wakes the waiters with the error rather than retrying forever.
 * The same thread tears down destroyed sandboxes first (their processes are
 * already dead); stop drains that queue, so shutdown leaves nothing. */
#include "sandbox/internal.h"

#include "core/log.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

/* A sandbox unlike the pooled ones (another disk size), built on request. */
typedef struct order {
	long long disk_bytes;
	struct ah_sandbox *sb;
	ah_err err;
	int rc;
	bool done;
	struct order *next;
} order;

static struct {
	pthread_mutex_t mu;
	pthread_cond_t wake;     /* to the pool thread */
	pthread_cond_t ready_cv; /* to waiters in take */
	struct ah_sandbox *ready;
	struct ah_sandbox *retired;
	order *orders;
	int nready, waiters;
	bool stop, running;
	unsigned fail_gen;
	ah_err fail;
	pthread_t th;
} P = { .mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
        .ready_cv = PTHREAD_COND_INITIALIZER };

static bool want_more(void)
{
	return !P.stop && P.nready < sb_g.pool_size + P.waiters;
}

static void backoff(int failures)
{
	/* Only while nobody waits: a waiter gets the error at once instead. */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += failures < 5 ? 1 : 5;
	while (!P.stop && P.waiters == 0 && !P.retired)
		if (pthread_cond_timedwait(&P.wake, &P.mu, &ts) != 0)
			break;
}

static void *pool_main(void *arg)
{
	(void)arg;
	int failures = 0;
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
		if (P.stop)
			break;
		if (P.orders) {
			order *o = P.orders;
			P.orders = o->next;
			pthread_mutex_unlock(&P.mu);
			o->rc = sb_build(&o->sb, o->disk_bytes, &o->err);
			pthread_mutex_lock(&P.mu);
			o->done = true;
			pthread_cond_broadcast(&P.ready_cv);
			continue;
		}
		if (!want_more()) {
			pthread_cond_wait(&P.wake, &P.mu);
			continue;
		}
		pthread_mutex_unlock(&P.mu);
		struct ah_sandbox *sb = NULL;
		ah_err err = { 0 };
		int rc = sb_build(&sb, 0, &err);
		pthread_mutex_lock(&P.mu);
		if (rc == 0) {
			sb->next = P.ready;
			P.ready = sb;
			P.nready++;
			failures = 0;
		} else {
			P.fail = err;
			P.fail_gen++;
			failures++;
		}
		pthread_cond_broadcast(&P.ready_cv);
		if (rc != 0)
			backoff(failures);
	}
	pthread_mutex_unlock(&P.mu);
	return NULL;
}

int sb_pool_start(ah_err *err)
{
	P.stop = false;
	if (pthread_create(&P.th, NULL, pool_main, NULL) != 0)
		return ah_err_set(err, AH_EFAIL, "cannot start the sandbox pool thread");
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

int sb_pool_take(struct ah_sandbox **out, long long disk_bytes, ah_err *err)
{
	if (disk_bytes > 0 && disk_bytes != sb_g.disk_bytes)
		return take_custom(out, disk_bytes, err);
	pthread_mutex_lock(&P.mu);
	unsigned gen = P.fail_gen;
	P.waiters++;
	pthread_cond_signal(&P.wake);
	while (!P.ready && !P.stop && P.fail_gen == gen)
		pthread_cond_wait(&P.ready_cv, &P.mu);
	P.waiters--;
	struct ah_sandbox *sb = P.ready;
	if (sb) {
		P.ready = sb->next;
		P.nready--;
		sb->next = NULL;
		pthread_cond_signal(&P.wake); /* refill */
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

void sb_pool_retire(struct ah_sandbox *sb)
{
	pthread_mutex_lock(&P.mu);
	if (!P.running) {
		pthread_mutex_unlock(&P.mu);
		sb_teardown(sb);
		return;
	}
	sb->next = P.retired;
	P.retired = sb;
	pthread_cond_signal(&P.wake);
	pthread_mutex_unlock(&P.mu);
}

void sb_pool_stop(void)
{
	if (!P.running)
		return;
	pthread_mutex_lock(&P.mu);
	P.stop = true;
	pthread_cond_broadcast(&P.wake);
	pthread_cond_broadcast(&P.ready_cv);
	pthread_mutex_unlock(&P.mu);
	pthread_join(P.th, NULL);
	P.running = false;
	while (P.ready) {
		struct ah_sandbox *sb = P.ready;
		P.ready = sb->next;
		sb_teardown(sb);
	}
	P.nready = 0;
}
