/* /usage and /usage/daily: what a user consumed over the last N UTC days, read
 * from the per-user daily rollup (usage_daily) that each invocation updates in
 * its own transaction. Keyed by user, not agent, so deleting an agent never
 * lowers it, and cheap however long the history is. */
#include "budgets.h"
#include "invocations.h"
#include "routes.h"
#include "core/money.h"
#include "core/util.h"
#include "db/record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DAY_SECONDS 86400LL

/* One day of the rollup, or the sum of a period (day NULL). */
typedef struct usage {
	const char *day;
	long long invocations, input_tokens, output_tokens;
	const char *cost; /* exact decimal text */
	/* What the model gateway measured (issue 27): the provider's tokens of
	 * the model_invocations calls it saw, which their cost was priced from. */
	long long model_invocations, model_input_tokens, model_output_tokens;
} usage;

#define TOTAL_COLS                                                                    \
	"COALESCE(SUM(invocations), 0), COALESCE(SUM(input_tokens), 0),"                  \
	" COALESCE(SUM(output_tokens), 0), COALESCE(SUM(total_cost_usd), 0),"           \
	" COALESCE(SUM(model_invocations), 0), COALESCE(SUM(model_input_tokens), 0),"    \
	" COALESCE(SUM(model_output_tokens), 0)"
static const ah_col TOTAL_COLUMNS[] = {
	AH_COL_I("COALESCE(SUM(invocations), 0)", usage, invocations, 0),
	AH_COL_I("COALESCE(SUM(input_tokens), 0)", usage, input_tokens, 0),
	AH_COL_I("COALESCE(SUM(output_tokens), 0)", usage, output_tokens, 0),
	AH_COL_S("COALESCE(SUM(total_cost_usd), 0)", usage, cost),
	AH_COL_I("COALESCE(SUM(model_invocations), 0)", usage, model_invocations, 0),
	AH_COL_I("COALESCE(SUM(model_input_tokens), 0)", usage, model_input_tokens, 0),
	AH_COL_I("COALESCE(SUM(model_output_tokens), 0)", usage, model_output_tokens, 0),
};
#define DAILY_COLS                                                                    \
	"day, invocations, input_tokens, output_tokens, total_cost_usd, model_invocations," \
	" model_input_tokens, model_output_tokens"
static const ah_col DAILY_COLUMNS[] = {
	AH_COL_S("day", usage, day),
	AH_COL_I("invocations", usage, invocations, 0),
	AH_COL_I("input_tokens", usage, input_tokens, 0),
	AH_COL_I("output_tokens", usage, output_tokens, 0),
	AH_COL_S("total_cost_usd", usage, cost),
	AH_COL_I("model_invocations", usage, model_invocations, 0),
	AH_COL_I("model_input_tokens", usage, model_input_tokens, 0),
	AH_COL_I("model_output_tokens", usage, model_output_tokens, 0),
};
#define NCOLS(t) (sizeof(t) / sizeof(t[0]))

static const char SQL_TOTAL[] =
	"SELECT " TOTAL_COLS " FROM usage_daily WHERE user_id = ? AND day BETWEEN ? AND ?";
static const char SQL_DAILY[] =
	"SELECT " DAILY_COLS " FROM usage_daily WHERE user_id = ? AND day BETWEEN ? AND ? ORDER BY day";

/* ---- period ---- */

typedef struct period {
	long long days, first_day; /* first_day: days since the epoch (UTC) */
	const char *start, *end;
} period;

static char *day_text(ah_arena *a, long long day)
{
	time_t t = (time_t)(day * DAY_SECONDS);
	struct tm tm;
	char buf[16];
	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
	return ah_strdup(a, buf);
}

/* ?days=N (1–365, default 30): today (UTC) and the N-1 days before it. */
static int read_period(ah_req *r, period *out)
{
	const char *d = ah_query_get(r, "days");
	out->days = 30;
	if (d && ah_parse_ll(&out->days, d) != 0)
		ah_verr(r, "query", "days", "Input should be a valid integer, unable to parse string as an integer",
		        "int_parsing");
	else if (out->days < 1)
		ah_verr(r, "query", "days", "Input should be greater than or equal to 1", "greater_than_equal");
	else if (out->days > 365)
		ah_verr(r, "query", "days", "Input should be less than or equal to 365", "less_than_equal");
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	long long today = (long long)time(NULL) / DAY_SECONDS;
	out->first_day = today - out->days + 1;
	out->start = day_text(r->arena, out->first_day);
	out->end = day_text(r->arena, today);
	return 0;
}


/* ---- handlers ---- */

/* The provider's counts beside the prompt's: 0 and 0 of 0 measured calls
 * when the gateway was off. */
static void model_json(json_object *o, const usage *u)
{
	ah_json_int(o, "model_invocations", u->model_invocations);
	ah_json_int(o, "model_input_tokens", u->model_input_tokens);
	ah_json_int(o, "model_output_tokens", u->model_output_tokens);
}

static int get_usage(ah_req *r)
{
	period p;
	ah_rows rows;
	int rc = read_period(r, &p);
	if (rc != 0)
		return rc;
	if (ah_db_query(r->db, r->arena, &rows, SQL_TOTAL, "sss", r->user->id, p.start, p.end) != 0 ||
	    rows.n != 1)
		return AH_EFAIL;
	static bool checked;
	usage u;
	AH_RECORD_CHECK(checked, TOTAL_COLUMNS, NCOLS(TOTAL_COLUMNS), TOTAL_COLS);
	ah_record_fill(&u, TOTAL_COLUMNS, NCOLS(TOTAL_COLUMNS), rows.v[0]);
	json_object *o = json_object_new_object();
	ah_json_int(o, "period_days", p.days);
	ah_json_str(o, "start_date", p.start);
	ah_json_str(o, "end_date", p.end);
	ah_json_int(o, "total_invocations", u.invocations);
	ah_json_int(o, "input_tokens", u.input_tokens);
	ah_json_int(o, "output_tokens", u.output_tokens);
	json_object_object_add(o, "total_cost_usd", ah_money_json(r->arena, u.cost));
	model_json(o, &u);
	if (ah_budget_usage(r, o) != 0)
		return AH_EFAIL;
	return ah_reply_json(r, 200, o);
}

static json_object *day_json(ah_req *r, const char *date, const usage *u)
{
	json_object *o = json_object_new_object();
	ah_json_str(o, "date", date);
	ah_json_int(o, "invocations", u->invocations);
	ah_json_int(o, "input_tokens", u->input_tokens);
	ah_json_int(o, "output_tokens", u->output_tokens);
	json_object_object_add(o, "total_cost_usd", ah_money_json(r->arena, u->cost));
	model_json(o, u);
	return o;
}

static int get_usage_daily(ah_req *r)
{
	period p;
	ah_rows rows;
	int rc = read_period(r, &p);
	if (rc != 0)
		return rc;
	if (ah_db_query(r->db, r->arena, &rows, SQL_DAILY, "sss", r->user->id, p.start, p.end) != 0)
		return AH_EFAIL;
	static bool checked;
	AH_RECORD_CHECK(checked, DAILY_COLUMNS, NCOLS(DAILY_COLUMNS), DAILY_COLS);
	json_object *items = json_object_new_array();
	size_t next = 0;
	/* One item per day, zeros where the rollup has no row; rows come sorted. */
	for (long long d = 0; d < p.days; d++) {
		const char *date = day_text(r->arena, p.first_day + d);
		usage u = {0};
		if (next < rows.n)
			ah_record_fill(&u, DAILY_COLUMNS, NCOLS(DAILY_COLUMNS), rows.v[next]);
		if (u.day && strcmp(u.day, date) == 0)
			next++;
		else /* a day without a row: zeros, cost NULL (money 0) */
			u = (usage){0};
		json_object_array_add(items, day_json(r, date, &u));
	}
	json_object *o = json_object_new_object();
	ah_json_int(o, "period_days", p.days);
	json_object_object_add(o, "items", items);
	return ah_reply_json(r, 200, o);
}

const ah_route ah_usage_routes[] = {
	{"GET", "/usage", get_usage, 0, 0},
	{"GET", "/usage/daily", get_usage_daily, 0, 0},
	{NULL, NULL, NULL, 0, 0},
};
