/* Spend limits (issue 32): max_cost_usd_per_day and max_cost_usd_per_month on
 * a user, an agent and an API key, the tightest applying. The spend of every
 * scope and UTC period lives in MariaDB (budget_spend, schema/027), changed
 * only by atomic `spent = spent + ?`, so every API host and every runner's
 * model gateway sees the same figure.
 *
 * A call is admitted in one transaction over its budgeted rows: refused (402)
 * when a budget is spent, and also while calls in flight could spend what is
 * left (each may cost as much as the period's dearest call so far): so calls
 * racing at the edge overshoot by one call's worth at most. The model gateway
 * charges each model answer as it comes and ends the call's model access at
 * the crossing (lib/runner/gateway_budget.c); the API charges the rest of the
 * call's cost at its end. */
#ifndef AH_HANDLERS_BUDGETS_H
#define AH_HANDLERS_BUDGETS_H

#include <json-c/json.h>
#include <stdbool.h>

#include "http/http.h"

#define AH_BUDGET_FIELDS "max_cost_usd_per_day", "max_cost_usd_per_month"

/* The two budget fields of a create or PATCH body: a JSON number (or a
 * decimal string), ≥ 0, at most 6 decimals and 999999.999999; null clears.
 * Problems are recorded as 422 entries naming the field. */
typedef struct ah_budget_in {
	const char *day, *month;   /* decimal text or NULL (no limit) */
	bool has_day, has_month;
} ah_budget_in;
void ah_budget_fields(ah_req *r, json_object *o, ah_budget_in *in);

/* Adds max_cost_usd_per_day and max_cost_usd_per_month (a number or null) to o. */
void ah_budget_json(ah_req *r, json_object *o, const char *day, const char *month);

/* One spend row of a call: scope ("user", "agent", "key") and id, period
 * ("day", "month") and its first day, and its limit (NULL: none). */
typedef struct ah_budget_row {
	const char *scope, *id, *period, *start, *limit;
} ah_budget_row;

typedef struct ah_budget_hold {
	ah_budget_row rows[6];
	int n;
	bool held;                 /* inflight was taken on the rows with a limit */
} ah_budget_hold;

/* The limits of a call's user, agent and API key (day, month each; NULL: no
 * limit) when the caller read them already (the invoke route's lookup). */
typedef struct ah_budget_limits {
	const char *user_day, *user_month, *agent_day, *agent_month, *key_day, *key_month;
} ah_budget_limits;

/* Admits a call of agent_id by the request's user and key: 0 (h filled),
 * AH_EDONE (402 answered) or AH_EFAIL. timeout_s bounds how long the call
 * holds its place at the edge. known: the limits as read with the request,
 * NULL to read them; a call no limit applies to costs no round trip. */
int ah_budget_admit(ah_req *r, const char *agent_id, const ah_budget_limits *known,
                    long long timeout_s, ah_budget_hold *h);

/* The rows for the runner's model gateway (run request "budget"), or NULL
 * when no row has a limit. */
json_object *ah_budget_spec(ah_req *r, const ah_budget_hold *h);

/* The call's end: its cost (decimal text) less what the gateway already
 * charged (pico-dollars) onto every row, its place at the edge released. */
void ah_budget_finish(ah_req *r, const ah_budget_hold *h, const char *cost, long long charged);

/* The same charge as data, for the history's write to make in its own
 * transaction (schema/035, invoke_record.c, which gives the call's whole
 * cost, each row's dearest call, with the row): the rows' day and month,
 * the key's id (NULL: a JWT's call, no key rows), the cost left to charge
 * and which rows release their place (bit i: row i, in ah_budget_hold's
 * order). */
typedef struct ah_budget_charge {
	const char *day, *month, *key_id, *rest;
	int release;
} ah_budget_charge;

/* Fills *ch for ah_budget_finish's charge: false when the hold's rows are
 * not the user's, agent's and key's in that order (their owner was deleted
 * before admission read them): ah_budget_finish charges those. */
bool ah_budget_charge_of(ah_req *r, const ah_budget_hold *h, const char *cost, long long charged,
                         ah_budget_charge *ch);

/* GET /usage's "budgets": every limit of the user and of its agents and keys,
 * with what its period spent and what remains. */
int ah_budget_usage(ah_req *r, json_object *out);

#endif
