/* Plans, one row each: the storage quota given to a new user of the plan (free
 * 100 MB, pro 10 GB, enterprise set per user, 1 TB until an operator says
 * otherwise), how many sessions a user may have live at once (free 3, pro 20,
 * enterprise 100; the max_sessions_<plan> configuration keys override them) and
 * the most warm processes (an agent's min_warm) a user may ask for per agent
 * (free 1, pro 10, enterprise 50; warm_max caps it host-wide). Each live session
 * and each warm process holds a sandbox (up to 2 GB of memory by default, which
 * counts against the host's sandbox budget). A new plan is one row here, one
 * value of the users table's plan ENUM and one max_sessions_<plan> key. */
#ifndef AH_CORE_PLANS_H
#define AH_CORE_PLANS_H

#include <stddef.h>
#include <string.h>

typedef enum { AH_PLAN_FREE, AH_PLAN_PRO, AH_PLAN_ENTERPRISE, AH_PLAN_COUNT } ah_plan_id;

typedef struct {
	const char *name;
	long long quota;    /* bytes */
	long long sessions; /* live sessions, unless max_sessions_<name> is set */
	long long warm;     /* min_warm per agent */
} ah_plan;

/* Indexed by ah_plan_id. */
static const ah_plan ah_plans[AH_PLAN_COUNT] = {
	[AH_PLAN_FREE] = {"free", 100LL << 20, 3, 1},
	[AH_PLAN_PRO] = {"pro", 10LL << 30, 20, 10},
	[AH_PLAN_ENTERPRISE] = {"enterprise", 1LL << 40, 100, 50},
};

/* The plan called name, or NULL. */
static inline const ah_plan *ah_plan_find(const char *name)
{
	for (size_t i = 0; name && i < AH_PLAN_COUNT; i++)
		if (strcmp(ah_plans[i].name, name) == 0)
			return &ah_plans[i];
	return NULL;
}

static inline ah_plan_id ah_plan_id_of(const ah_plan *p)
{
	return (ah_plan_id)(p - ah_plans);
}

/* Default quota in bytes of a plan, or -1 for an unknown plan name. */
static inline long long ah_plan_quota(const char *plan)
{
	const ah_plan *p = ah_plan_find(plan);
	return p ? p->quota : -1;
}

/* Default number of concurrent live sessions of a plan's user, or -1. */
static inline long long ah_plan_max_sessions(const char *plan)
{
	const ah_plan *p = ah_plan_find(plan);
	return p ? p->sessions : -1;
}

#endif
