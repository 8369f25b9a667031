/* /usage and /usage/daily: what a user consumed over the last N UTC days, read
 * from the per-user daily rollup (usage_daily) that each invocation updates in
 * its own transaction. Keyed by user, not agent, so deleting an agent never
 * lowers it, and cheap however long the history is.
 *
 * Also the money helpers: amounts are integer pico-dollars, never floats, and go
 * out as JSON numbers printed from their exact decimal text. */
#include "invocations.h"
#include "routes.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PICO_PER_USD 1000000000000LL
#define DAY_SECONDS 86400LL

static const char SQL_TOTAL[] =
	"SELECT COALESCE(SUM(invocations), 0), COALESCE(SUM(input_tokens), 0),"
	" COALESCE(SUM(output_tokens), 0), COALESCE(SUM(total_cost_usd), 0)"
	" FROM usage_daily WHERE user_id = ? AND day BETWEEN ? AND ?";
static const char SQL_DAILY[] =
	"SELECT day, invocations, input_tokens, output_tokens, total_cost_usd"
	" FROM usage_daily WHERE user_id = ? AND day BETWEEN ? AND ? ORDER BY day";

/* ---- money ---- */

int ah_price_parse(long long *out, const char *s)
{
	long long whole = 0, frac = 0;
	int fdigits = 0, wdigits = 0;
	const char *p = s;
	for (; *p >= '0' && *p <= '9'; p++, wdigits++) {
		if (wdigits >= 6)
			return AH_EINVALID; /* a million dollars per million tokens is not a price */
		whole = whole * 10 + (*p - '0');
	}
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++, fdigits++) {
			if (fdigits >= 6)
				return AH_EINVALID;
			frac = frac * 10 + (*p - '0');
		}
	if (*p != '\0' || (wdigits == 0 && fdigits == 0))
		return AH_EINVALID;
	for (int i = fdigits; i < 6; i++)
		frac *= 10;
	*out = whole * 1000000 + frac;
	return 0;
}

int ah_cost_pico(long long *out, long long in_tok, long long out_tok,
                 long long in_price, long long out_price)
{
	long long a, b;
	if (in_tok < 0 || out_tok < 0 || __builtin_mul_overflow(in_tok, in_price, &a) ||
	    __builtin_mul_overflow(out_tok, out_price, &b) || __builtin_add_overflow(a, b, out))
		return AH_EINVALID;
	return 0;
}

/* Drops trailing zeros of the fraction but keeps one digit, so the JSON value
 * always reads as a decimal number ("2.0", "0.000117"). */
static char *trim_fraction(char *s)
{
	char *dot = strchr(s, '.');
	if (!dot)
		return s;
	size_t n = strlen(s);
	while (n > (size_t)(dot - s) + 2 && s[n - 1] == '0')
		s[--n] = '\0';
	return s;
}

char *ah_money_text(ah_arena *a, long long pico)
{
	const char *sign = pico < 0 ? "-" : "";
	unsigned long long v = pico < 0 ? 0ULL - (unsigned long long)pico : (unsigned long long)pico;
	return trim_fraction(ah_sprintf(a, "%s%llu.%012llu", sign, v / PICO_PER_USD, v % PICO_PER_USD));
}

char *ah_money_normalise(ah_arena *a, const char *dec)
{
	if (!dec || !*dec)
		return ah_strdup(a, "0.0");
	char *s = strchr(dec, '.') ? ah_strdup(a, dec) : ah_sprintf(a, "%s.0", dec);
	return trim_fraction(s);
}

json_object *ah_money_json(ah_arena *a, const char *dec)
{
	const char *text = ah_money_normalise(a, dec);
	/* The double is only json-c's in-memory value; the output is `text` verbatim. */
	return json_object_new_double_s(strtod(text, NULL), text);
}

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

static long long cell_ll(const char *s)
{
	long long v = 0;
	ah_parse_ll(&v, s);
	return v;
}

/* ---- handlers ---- */

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
	char **v = rows.v[0];
	json_object *o = json_object_new_object();
	ah_json_int(o, "period_days", p.days);
	ah_json_str(o, "start_date", p.start);
	ah_json_str(o, "end_date", p.end);
	ah_json_int(o, "total_invocations", cell_ll(v[0]));
	ah_json_int(o, "input_tokens", cell_ll(v[1]));
	ah_json_int(o, "output_tokens", cell_ll(v[2]));
	json_object_object_add(o, "total_cost_usd", ah_money_json(r->arena, v[3]));
	return ah_reply_json(r, 200, o);
}

static json_object *day_json(ah_req *r, const char *date, char **v)
{
	json_object *o = json_object_new_object();
	ah_json_str(o, "date", date);
	ah_json_int(o, "invocations", v ? cell_ll(v[1]) : 0);
	ah_json_int(o, "input_tokens", v ? cell_ll(v[2]) : 0);
	ah_json_int(o, "output_tokens", v ? cell_ll(v[3]) : 0);
	json_object_object_add(o, "total_cost_usd", ah_money_json(r->arena, v ? v[4] : NULL));
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
	json_object *items = json_object_new_array();
	size_t next = 0;
	/* One item per day, zeros where the rollup has no row; rows come sorted. */
	for (long long d = 0; d < p.days; d++) {
		const char *date = day_text(r->arena, p.first_day + d);
		char **v = NULL;
		if (next < rows.n && strcmp(rows.v[next][0], date) == 0)
			v = rows.v[next++];
		json_object_array_add(items, day_json(r, date, v));
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
