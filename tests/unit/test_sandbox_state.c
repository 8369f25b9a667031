/* The runner's sandbox states (lib/runner/sandboxes_state.c) and lock order
 * (lib/runner/lockorder.c): every change the registry makes is accepted, every
 * other one is refused and reported (not applied), and a lock taken out of
 * order is reported. The violation hook stands in for the abort. TAP. */
#include "runner/lockorder.h"
#include "runner/sandboxes_int.h"
#include "tap.h"

#include <pthread.h>
#include <string.h>

/* Every change the registry makes (sandboxes.c, sandboxes_warm.c), spelled
 * out again here from the code, apart from the table. */
static const struct { enum ah_sbx_state from, to; } made[] = {
	{AH_SBX_NEW, AH_SBX_EPHEMERAL},          /* acquire */
	{AH_SBX_NEW, AH_SBX_SESSION},            /* acquire of a session */
	{AH_SBX_NEW, AH_SBX_SPARE},              /* build_spare */
	{AH_SBX_NEW, AH_SBX_WARM},               /* add_warm */
	{AH_SBX_SPARE, AH_SBX_EPHEMERAL},        /* take_spare */
	{AH_SBX_WARM, AH_SBX_EPHEMERAL},         /* take_warm, still starting */
	{AH_SBX_WARM_READY, AH_SBX_EPHEMERAL},   /* take_warm */
	{AH_SBX_WARM, AH_SBX_WARM_READY},        /* warm_poll */
	{AH_SBX_WARM, AH_SBX_WARM_DIED},         /* warm_usable */
	{AH_SBX_WARM_READY, AH_SBX_WARM_DIED},   /* warm_usable */
	{AH_SBX_SESSION, AH_SBX_HELD},           /* lease_set_held */
	{AH_SBX_HELD, AH_SBX_HELD},              /* lease_set_held, no call took it */
	{AH_SBX_HELD_READY, AH_SBX_HELD},        /* lease_set_held, no call took it */
	{AH_SBX_HELD, AH_SBX_HELD_READY},        /* warm_poll */
	{AH_SBX_HELD, AH_SBX_SESSION},           /* lease_held, drop_held */
	{AH_SBX_HELD_READY, AH_SBX_SESSION},     /* lease_held, drop_held */
};

static int violations;
static char last[256];

static void caught(const char *what)
{
	violations++;
	snprintf(last, sizeof last, "%s", what);
}

static bool is_made(enum ah_sbx_state from, enum ah_sbx_state to)
{
	for (size_t i = 0; i < sizeof made / sizeof made[0]; i++)
		if (made[i].from == from && made[i].to == to)
			return true;
	return false;
}

static void test_table(void)
{
	int wrong = 0;
	for (int f = 0; f < AH_SBX_NSTATES; f++)
		for (int t = 0; t < AH_SBX_NSTATES; t++)
			if (ah_sbx_state_allowed(f, t) != is_made(f, t)) {
				wrong++;
				printf("# %s -> %s: table %d, code %d\n", ah_sbx_state_name(f),
				       ah_sbx_state_name(t), ah_sbx_state_allowed(f, t), is_made(f, t));
			}
	ok(wrong == 0, "the table allows exactly the changes the registry makes");
	ok(!ah_sbx_state_allowed(AH_SBX_NSTATES, AH_SBX_SPARE) &&
	   !ah_sbx_state_allowed(AH_SBX_NEW, (enum ah_sbx_state)-1), "a state out of range is refused");
	ok(strcmp(ah_sbx_state_name(AH_SBX_WARM_DIED), "warm-died") == 0, "states have names");
}

static void test_set_state(void)
{
	struct ah_sbx_entry e = {.agent_id = "a1"};
	int accepted = 0;
	for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
		e.state = made[i].from;
		accepted += ah_sbx_set_state(&e, made[i].to) == 0 && e.state == made[i].to;
	}
	ok(accepted == (int)(sizeof made / sizeof made[0]) && violations == 0,
	   "every change the registry makes is accepted (%d)", accepted);

	e.state = AH_SBX_SPARE; /* a spare never serves a session */
	int rc = ah_sbx_set_state(&e, AH_SBX_HELD);
	ok(rc == -1 && e.state == AH_SBX_SPARE, "spare -> held is refused and not applied");
	ok(violations == 1 && strstr(last, "spare -> held") && strstr(last, "agent=a1"),
	   "and reported: %s", last);

	e.state = AH_SBX_EPHEMERAL; /* taken: never warm again */
	rc = ah_sbx_set_state(&e, AH_SBX_WARM_READY);
	ok(rc == -1 && e.state == AH_SBX_EPHEMERAL && violations == 2,
	   "ephemeral -> warm-ready is refused");
	e.state = AH_SBX_WARM_DIED;
	rc = ah_sbx_set_state(&e, AH_SBX_EPHEMERAL);
	ok(rc == -1 && violations == 3, "a warm sandbox whose program died is never handed to a call");
	e.state = AH_SBX_SESSION;
	rc = ah_sbx_set_state(&e, AH_SBX_NEW);
	ok(rc == -1 && violations == 4, "nothing goes back to new");
}

static void test_lock_order(void)
{
#ifdef NDEBUG
	ok(1, "# SKIP lock order checks are compiled out (NDEBUG)");
#else
	pthread_mutex_t run = PTHREAD_MUTEX_INITIALIZER, run2 = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_t fuse = PTHREAD_MUTEX_INITIALIZER, sbx = PTHREAD_MUTEX_INITIALIZER;
	violations = 0;
	ah_lock(&run, AH_LOCK_RUN);
	ah_lock(&fuse, AH_LOCK_FUSE);
	ah_lock(&sbx, AH_LOCK_SBX);
	ah_unlock(&sbx, AH_LOCK_SBX);
	ah_unlock(&fuse, AH_LOCK_FUSE);
	ah_unlock(&run, AH_LOCK_RUN);
	ok(violations == 0, "run, mounts, registry: in order");

	ah_lock(&sbx, AH_LOCK_SBX);
	ah_lock(&fuse, AH_LOCK_FUSE);
	ok(violations == 1 && strstr(last, "rank 2 taken with rank 3 held"),
	   "the mounts' mutex under the registry's is reported: %s", last);
	ah_unlock(&fuse, AH_LOCK_FUSE);
	ah_unlock(&sbx, AH_LOCK_SBX);

	ah_lock(&run, AH_LOCK_RUN);
	ah_lock(&run2, AH_LOCK_RUN);
	ok(violations == 2, "a second run mutex is reported");
	ah_unlock(&run2, AH_LOCK_RUN);
	ok(ah_trylock(&run2, AH_LOCK_RUN) == 0 && violations == 2, "a trylock is exempt");
	ah_unlock(&run2, AH_LOCK_RUN);
	ah_unlock(&run, AH_LOCK_RUN);

	ah_lock(&sbx, AH_LOCK_SBX);
	ah_unlock(&sbx, AH_LOCK_SBX);
	ok(violations == 2, "all let go: the registry's alone is fine");
#endif
}

int main(void)
{
	ah_runner_violation_hook = caught;
	test_table();
	test_set_state();
	test_lock_order();
	return tap_done();
}
