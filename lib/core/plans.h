/* Plans and their defaults: storage quotas (free 100 MB, pro 10 GB, enterprise
 * set per user, 1 TB until an operator says otherwise) and how many sessions a
 * user may have live at once (free 3, pro 20, enterprise 100; the
 * max_sessions_<plan> configuration keys override them). */
#ifndef AH_CORE_PLANS_H
#define AH_CORE_PLANS_H

#include <string.h>

/* Default quota in bytes of a plan, or -1 for an unknown plan name. */
static inline long long ah_plan_quota(const char *plan)
{
	if (strcmp(plan, "free") == 0)
		return 100LL * 1024 * 1024;
	if (strcmp(plan, "pro") == 0)
		return 10LL * 1024 * 1024 * 1024;
	if (strcmp(plan, "enterprise") == 0)
		return 1024LL * 1024 * 1024 * 1024;
	return -1;
}

/* Default number of concurrent live sessions of a plan's user, or -1 for an
 * unknown plan name. Each live session holds a sandbox (up to 2 GB of memory
 * by default) until it is deleted, ends or is reclaimed when idle. */
static inline long long ah_plan_max_sessions(const char *plan)
{
	if (strcmp(plan, "free") == 0)
		return 3;
	if (strcmp(plan, "pro") == 0)
		return 20;
	if (strcmp(plan, "enterprise") == 0)
		return 100;
	return -1;
}

/* The most warm processes (an agent's min_warm) a plan's user may ask for per
 * agent, or -1 for an unknown plan name; warm_max caps it host-wide. Each holds
 * a sandbox (its memory counts against the host's sandbox budget) while no
 * call is running. */
static inline long long ah_plan_max_warm(const char *plan)
{
	if (strcmp(plan, "free") == 0)
		return 1;
	if (strcmp(plan, "pro") == 0)
		return 10;
	if (strcmp(plan, "enterprise") == 0)
		return 50;
	return -1;
}

#endif
