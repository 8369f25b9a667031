/* Plans and their default storage quotas (free 100 MB, pro 10 GB, enterprise set
 * per user, 1 TB until an operator says otherwise). */
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

#endif
