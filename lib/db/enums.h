/* The ENUM columns of schema/ as C: each value's text once (AH_<TYPE>_S_<V>),
 * the C enum in the column's order, and its names table (index = value,
 * NULL-terminated, built from the texts by designated initializers so order
 * and spelling cannot drift). tests/unit/test_enums.c parses every migration
 * and fails when a column's values and its table differ.
 *
 * SQL built in C writes a value with AH_SQ: "... SET state = " AH_SQ(AH_JOB_S_FAILED)
 * is the literal 'failed', and a misspelt name does not compile. A bound value
 * is the name itself (AH_JOB_S_FAILED or ah_job_state_names[s]).
 *
 * Tables kept where their record is parsed: agents.status and source_type
 * (handlers/agents.h), invocations.status (handlers/invocations.h), files.scope
 * and status (files/files.h), buckets.provider (buckets/buckets.h), users.plan
 * (core/plans.h). Their texts are here, so the runner and the libraries below
 * the handlers write them the same way. */
#ifndef AH_DB_ENUMS_H
#define AH_DB_ENUMS_H

/* A value's text as an SQL string literal. */
#define AH_SQ(v) "'" v "'"

/* deploy_jobs.state (001_core.sql) */
#define AH_JOB_S_QUEUED "queued"
#define AH_JOB_S_RUNNING "running"
#define AH_JOB_S_DONE "done"
#define AH_JOB_S_FAILED "failed"
typedef enum ah_job_state { AH_JOB_QUEUED, AH_JOB_RUNNING, AH_JOB_DONE, AH_JOB_FAILED } ah_job_state;
extern const char *const ah_job_state_names[];

/* sessions.state (002_invocations.sql) */
#define AH_SESSION_S_ACTIVE "active"
#define AH_SESSION_S_EXPIRED "expired"
#define AH_SESSION_S_ENDED "ended"
typedef enum ah_session_state { AH_SESSION_ACTIVE, AH_SESSION_EXPIRED, AH_SESSION_ENDED } ah_session_state;
extern const char *const ah_session_state_names[];

/* invocations.trigger_type (029_schedules.sql) */
#define AH_TRIGGER_S_API "api"
#define AH_TRIGGER_S_SCHEDULE "schedule"
typedef enum ah_trigger_type { AH_TRIGGER_API, AH_TRIGGER_SCHEDULE } ah_trigger_type;
extern const char *const ah_trigger_type_names[];

/* webhook_deliveries.state (025_webhooks.sql) */
#define AH_DELIVERY_S_PENDING "pending"
#define AH_DELIVERY_S_DELIVERED "delivered"
#define AH_DELIVERY_S_FAILED "failed"
typedef enum ah_delivery_state { AH_DELIVERY_PENDING, AH_DELIVERY_DELIVERED, AH_DELIVERY_FAILED } ah_delivery_state;
extern const char *const ah_delivery_state_names[];

/* budget_spend.scope and period (027_budgets.sql) */
#define AH_SPEND_S_USER "user"
#define AH_SPEND_S_AGENT "agent"
#define AH_SPEND_S_KEY "key"
typedef enum ah_spend_scope { AH_SPEND_USER, AH_SPEND_AGENT, AH_SPEND_KEY } ah_spend_scope;
extern const char *const ah_spend_scope_names[];
#define AH_PERIOD_S_DAY "day"
#define AH_PERIOD_S_MONTH "month"
typedef enum ah_spend_period { AH_PERIOD_DAY, AH_PERIOD_MONTH } ah_spend_period;
extern const char *const ah_spend_period_names[];

/* agents.status and source_type (001_core.sql; deploys.source_type, 022): the
 * C enums and tables are handlers/agents.h's. */
#define AH_AGENT_S_DRAFT "draft"
#define AH_AGENT_S_DEPLOYING "deploying"
#define AH_AGENT_S_ACTIVE "active"
#define AH_AGENT_S_ERROR "error"
#define AH_AGENT_S_STOPPED "stopped"
#define AH_SOURCE_S_GIT "git"
#define AH_SOURCE_S_LOCAL "local"

/* invocations.status (002, 024 added cancelled): handlers/invocations.h's. */
#define AH_INV_S_COMPLETED "completed"
#define AH_INV_S_FAILED "failed"
#define AH_INV_S_CANCELLED "cancelled"

/* files.scope and status (010_files.sql): files/files.h's. */
#define AH_SCOPE_S_USER "user"
#define AH_SCOPE_S_AGENT "agent"
#define AH_SCOPE_S_SESSION "session"
#define AH_FILE_S_PENDING "pending"
#define AH_FILE_S_CONFIRMED "confirmed"

#endif
