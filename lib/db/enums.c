/* The names tables of db/enums.h. */
#include "db/enums.h"

#include <stddef.h>

const char *const ah_job_state_names[] = {
	[AH_JOB_QUEUED] = AH_JOB_S_QUEUED, [AH_JOB_RUNNING] = AH_JOB_S_RUNNING,
	[AH_JOB_DONE] = AH_JOB_S_DONE,     [AH_JOB_FAILED] = AH_JOB_S_FAILED,
	[AH_JOB_FAILED + 1] = NULL};

const char *const ah_session_state_names[] = {
	[AH_SESSION_ACTIVE] = AH_SESSION_S_ACTIVE, [AH_SESSION_EXPIRED] = AH_SESSION_S_EXPIRED,
	[AH_SESSION_ENDED] = AH_SESSION_S_ENDED,   [AH_SESSION_ENDED + 1] = NULL};

const char *const ah_trigger_type_names[] = {
	[AH_TRIGGER_API] = AH_TRIGGER_S_API, [AH_TRIGGER_SCHEDULE] = AH_TRIGGER_S_SCHEDULE,
	[AH_TRIGGER_SCHEDULE + 1] = NULL};

const char *const ah_delivery_state_names[] = {
	[AH_DELIVERY_PENDING] = AH_DELIVERY_S_PENDING, [AH_DELIVERY_DELIVERED] = AH_DELIVERY_S_DELIVERED,
	[AH_DELIVERY_FAILED] = AH_DELIVERY_S_FAILED,   [AH_DELIVERY_FAILED + 1] = NULL};

const char *const ah_spend_scope_names[] = {
	[AH_SPEND_USER] = AH_SPEND_S_USER, [AH_SPEND_AGENT] = AH_SPEND_S_AGENT,
	[AH_SPEND_KEY] = AH_SPEND_S_KEY,   [AH_SPEND_KEY + 1] = NULL};

const char *const ah_spend_period_names[] = {
	[AH_PERIOD_DAY] = AH_PERIOD_S_DAY, [AH_PERIOD_MONTH] = AH_PERIOD_S_MONTH,
	[AH_PERIOD_MONTH + 1] = NULL};
