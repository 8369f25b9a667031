/* Unit test of lib/ratelimit/lease.c (the host-local token pool), printed as TAP.
 * The database is simulated by a counter in shared memory that grants tokens
 * the way the reservation statement does, so the tests can check that the
 * global limit holds across processes and "hosts" (separate tables). */
#include "ratelimit/lease.h"
#include "tap.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- pure sizing ---- */

struct chunk_case {
	long long limit, reserved, expect;
};

static const struct chunk_case chunk_cases[] = {
	{100, 0, 1},              /* small limits: one token at a time, exact */
	{100, 99, 1},
	{127, 0, 1},
	{128, 0, 2},
	{1000, 0, 15},
	{1000, 990, 1},           /* the end of a budget goes one by one */
	{1000, 1000, 1},
	{1000, 1200, 1},          /* over (limit lowered): still ask for one */
	{1000000000, 0, 4096},    /* huge limits: capped */
	{1000000000, 999999000, 15},
};

static void test_chunk(void)
{
	for (size_t i = 0; i < sizeof(chunk_cases) / sizeof(chunk_cases[0]); i++) {
		const struct chunk_case *c = &chunk_cases[i];
		long long got = ah_rl_chunk(c->limit, c->reserved);
		ok(got == c->expect, "chunk(limit, reserved) = %lld (want %lld)", got, c->expect);
	}
}

struct granted_case {
	long long limit, old, asked, expect;
};

static const struct granted_case granted_cases[] = {
	{100, 0, 1, 1},
	{100, 99, 1, 1},
	{100, 100, 1, 0},
	{100, 150, 5, 0},
	{100, 90, 64, 10},
	{1000000000, 5, 4096, 4096},
};

static void test_granted(void)
{
	for (size_t i = 0; i < sizeof(granted_cases) / sizeof(granted_cases[0]); i++) {
		const struct granted_case *c = &granted_cases[i];
		long long got = ah_rl_granted(c->limit, c->old, c->asked);
		ok(got == c->expect, "granted = %lld (want %lld)", got, c->expect);
	}
	ok(ah_rl_window(125) == 120 && ah_rl_window(120) == 120, "window(125) = %lld, %lld",
	   ah_rl_window(125), ah_rl_window(120));
}

/* ---- a simulated database row ---- */

struct fake_db {
	pthread_mutex_t mu;
	long long hits;
	long long reservations;
};

static struct fake_db *fake_db_new(void)
{
	struct fake_db *db = mmap(NULL, sizeof(*db), PROT_READ | PROT_WRITE,
	                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (db == MAP_FAILED)
		abort();
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&db->mu, &a);
	return db;
}

static void reserve(struct fake_db *db, long long limit, long long asked, long long *granted,
                    long long *total)
{
	pthread_mutex_lock(&db->mu);
	*granted = ah_rl_granted(limit, db->hits, asked);
	db->hits += *granted;
	*total = db->hits;
	db->reservations++;
	pthread_mutex_unlock(&db->mu);
}

/* One request the way ratelimit.c does it, the idle-time refill included.
 * Returns 1 when admitted. */
static int hit(ah_rl_table *t, struct fake_db *db, const char *key, long long now,
               long long limit, long long *remaining)
{
	ah_rl_ticket tk;
	enum ah_rl_verdict v = ah_rl_take(t, key, now, limit, &tk);
	long long g, total;
	if (v == AH_RL_RESERVE || v == AH_RL_NOSLOT) {
		reserve(db, limit, tk.chunk, &g, &total);
		v = ah_rl_settle(v == AH_RL_RESERVE ? t : NULL, key, limit, g, total, true, &tk);
	}
	*remaining = tk.remaining;
	if (tk.prefetch) {
		reserve(db, limit, tk.chunk, &g, &total);
		ah_rl_settle(t, key, limit, g, total, false, &tk);
	}
	return v == AH_RL_TAKEN;
}

static void test_small_limit_exact(void)
{
	ah_rl_table *t = ah_rl_table_new(256);
	struct fake_db *db = fake_db_new();
	long long admitted = 0, rem, countdown_ok = 1;
	for (int i = 0; i < 150; i++) {
		int in = hit(t, db, "cu:alice", 1000, 100, &rem);
		admitted += in;
		if (rem != (i < 100 ? 99 - i : 0))
			countdown_ok = 0;
	}
	ok(admitted == 100, "limit 100: admitted %lld of 150 (want 100)", admitted);
	ok(countdown_ok, "limit 100: X-RateLimit-Remaining counts down by one");
	ok(db->reservations == 100, "limit 100: %lld reservations (want 100: one per token)",
	   db->reservations);
	ok(db->hits == 100, "limit 100: the row holds %lld (want 100)", db->hits);
	ah_rl_table_free(t);
}

static void test_large_limit_chunks(void)
{
	ah_rl_table *t = ah_rl_table_new(256);
	struct fake_db *db = fake_db_new();
	long long limit = 1000000000, rem = 0, exact = 1;
	for (long long i = 1; i <= 100000; i++) {
		hit(t, db, "cu:bench", 1000, limit, &rem);
		if (rem != limit - i)
			exact = 0;
	}
	ok(exact, "limit 1e9: X-RateLimit-Remaining exact on one host");
	ok(db->reservations < 100, "limit 1e9: %lld reservations for 100000 requests",
	   db->reservations);
	ah_rl_table_free(t);
}

static void test_window_and_over(void)
{
	ah_rl_table *t = ah_rl_table_new(256);
	struct fake_db *db = fake_db_new();
	long long rem;
	for (int i = 0; i < 3; i++)
		hit(t, db, "ip:10.0.0.1", 1000, 3, &rem);
	long long before = db->reservations;
	int in = hit(t, db, "ip:10.0.0.1", 1000, 3, &rem);
	in += hit(t, db, "ip:10.0.0.1", 1000, 3, &rem);
	ok(in == 0, "over the limit: %d admitted (want 0)", in);
	ok(db->reservations - before == 0,
	   "a spent window is remembered: %lld database trips for 2 refusals (want 0)",
	   db->reservations - before);
	db->hits = 0; /* the next minute's row */
	in = hit(t, db, "ip:10.0.0.1", 1060, 3, &rem);
	ok(in == 1 && rem == 2, "next window admits again (in %d, remaining %lld)", in, rem);
	ah_rl_table_free(t);
}

static void test_table_full(void)
{
	ah_rl_table *t = ah_rl_table_new(4);
	ah_rl_ticket tk;
	char key[32];
	int noslot = 0;
	for (int i = 0; i < 6; i++) {
		snprintf(key, sizeof(key), "cu:%d", i);
		noslot += ah_rl_take(t, key, 1000, 100, &tk) == AH_RL_NOSLOT;
	}
	ok(noslot == 2, "4 slots, 6 subjects: %d fall back to the database (want 2)", noslot);
	noslot = ah_rl_take(t, "cu:5", 1060, 100, &tk) == AH_RL_NOSLOT;
	ok(noslot == 0, "old windows' slots are reused");
	noslot = ah_rl_take(NULL, "cu:1", 1000, 100, &tk) == AH_RL_NOSLOT;
	ok(noslot == 1, "no table: every request goes to the database");
	ah_rl_table_free(t);
}

/* Children hammer one table (one host) or two tables (two hosts) sharing a
 * database row; the admitted total goes through a pipe. */
static long long hammer(ah_rl_table **tables, int ntables, int procs, int each,
                        long long limit, struct fake_db *db)
{
	int fds[2];
	if (pipe(fds) != 0)
		abort();
	for (int p = 0; p < procs; p++) {
		if (fork() == 0) {
			long long in = 0, rem;
			for (int i = 0; i < each; i++)
				in += hit(tables[p % ntables], db, "cu:shared", 1000, limit, &rem);
			if (write(fds[1], &in, sizeof(in)) != sizeof(in))
				_exit(1);
			_exit(0);
		}
	}
	long long total = 0;
	for (int p = 0; p < procs; p++) {
		long long in = 0;
		if (read(fds[0], &in, sizeof(in)) == sizeof(in))
			total += in;
		wait(NULL);
	}
	close(fds[0]);
	close(fds[1]);
	return total;
}

static void test_processes(void)
{
	ah_rl_table *one[1] = {ah_rl_table_new(256)};
	struct fake_db *db = fake_db_new();
	long long in = hammer(one, 1, 6, 1000, 2500, db);
	ok(in == 2500, "one host, 6 processes, limit 2500: admitted %lld (want 2500)", in);

	ah_rl_table *two[2] = {ah_rl_table_new(256), ah_rl_table_new(256)};
	struct fake_db *db2 = fake_db_new();
	in = hammer(two, 2, 6, 1000, 2500, db2);
	ok(in <= 2500 && in >= 2500 - 2 * 2500 / AH_RL_SHARE,
	   "two hosts, limit 2500: admitted %lld (at most, and close to, 2500)", in);
	ok(db2->hits <= 2500, "two hosts: the row never passes the limit (%lld)", db2->hits);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0); /* children must not repeat buffered lines */
	test_chunk();
	test_granted();
	test_small_limit_exact();
	test_large_limit_chunks();
	test_window_and_over();
	test_table_full();
	test_processes();
	return tap_done();
}
