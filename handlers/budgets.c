/* Spend limits: fields, admission and charging; see budgets.h. */
#include "budgets.h"
#include "core/log.h"
#include "core/money.h"
#include "core/util.h"
#include "db/enums.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HELD_RETRY_S 5 /* a call in flight at the edge is usually over by then */

/* ---- fields ---- */

/* Decimal places of a number's text ("1.25" → 2), -1 with an exponent. */
static int decimals(const char *s)
{
	if (strpbrk(s, "eE"))
		return -1;
	const char *dot = strchr(s, '.');
	return dot ? (int)strspn(dot + 1, "0123456789") : 0;
}

static void budget_field(ah_req *r, json_object *o, const char *name, const char **out, bool *has)
{
	json_object *v;
	long long pico;
	if (!json_object_object_get_ex(o, name, &v))
		return;
	*has = true;
	*out = NULL;
	if (!v)
		return;
	json_type t = json_object_get_type(v);
	const char *s = json_object_get_string(v);
	if (t != json_type_int && t != json_type_double && t != json_type_string)
		ah_verr(r, "body", name, "Input should be a valid decimal", "decimal_type");
	else if (*s == '-')
		ah_verr(r, "body", name, "Input should be greater than or equal to 0", "greater_than_equal");
	else if (decimals(s) > 6)
		ah_verr(r, "body", name, "Decimal input should have no more than 6 decimal places",
		        "decimal_max_places");
	else if (ah_price_parse(&pico, s) != 0) /* digits only, at most 999999.999999 */
		ah_verr(r, "body", name, "Input should be a decimal from 0 to 999999.999999", "decimal_parsing");
	else
		*out = s;
}

void ah_budget_fields(ah_req *r, json_object *o, ah_budget_in *in)
{
	budget_field(r, o, "max_cost_usd_per_day", &in->day, &in->has_day);
	budget_field(r, o, "max_cost_usd_per_month", &in->month, &in->has_month);
}

static json_object *limit_json(ah_req *r, const char *v)
{
	return v ? ah_money_json(r->arena, v) : NULL;
}

void ah_budget_json(ah_req *r, json_object *o, const char *day, const char *month)
{
	json_object_object_add(o, "max_cost_usd_per_day", limit_json(r, day));
	json_object_object_add(o, "max_cost_usd_per_month", limit_json(r, month));
}

/* ---- periods ---- */

/* The first day of this UTC day and month, and when each ends (epoch s). */
typedef struct periods {
	char day[11], month[11];
	time_t day_end, month_end;
} periods;

static void periods_now(periods *p)
{
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(p->day, sizeof p->day, "%Y-%m-%d", &tm);
	strftime(p->month, sizeof p->month, "%Y-%m-01", &tm);
	struct tm d = {.tm_year = tm.tm_year, .tm_mon = tm.tm_mon, .tm_mday = tm.tm_mday + 1};
	struct tm m = {.tm_year = tm.tm_year, .tm_mon = tm.tm_mon + 1, .tm_mday = 1};
	p->day_end = timegm(&d); /* timegm normalises the day and month past their end */
	p->month_end = timegm(&m);
}

static const char *iso_time(ah_req *r, time_t t)
{
	struct tm tm;
	char buf[32];
	gmtime_r(&t, &tm);
	strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return ah_strdup(r->arena, buf);
}

/* ---- admission ---- */

static const char SQL_LIMITS[] =
	"SELECT 'user', id, max_cost_usd_per_day, max_cost_usd_per_month FROM users WHERE id = ?"
	" UNION ALL SELECT 'agent', id, max_cost_usd_per_day, max_cost_usd_per_month FROM agents"
	" WHERE id = ? UNION ALL SELECT 'key', id, max_cost_usd_per_day, max_cost_usd_per_month"
	" FROM api_keys WHERE id = ?";
/* A period's row starts with the period before's dearest call (kept a day
 * by the runners' sweep): without one, calls in flight hold the edge until
 * the first of them ends. */
static const char SQL_ROW[] =
	"INSERT IGNORE INTO budget_spend (scope, scope_id, period, period_start, max_call)"
	" SELECT ?, ?, ?, ?, COALESCE((SELECT max_call FROM budget_spend WHERE scope = ? AND"
	" scope_id = ? AND period = ? AND period_start < ? ORDER BY period_start DESC LIMIT 1), 0)";
/* A call in flight counts until inflight_until (its deadline): one whose API
 * worker died holds the edge no longer than that. */
#define LIVE "IF(inflight_until > NOW(3), inflight, 0)"
static const char SQL_LOCK[] =
	"SELECT spent >= CAST(? AS DECIMAL(12,6)), " LIVE " > 0 AND (max_call = 0 OR spent + (" LIVE
	" + 1) * max_call > CAST(? AS DECIMAL(12,6))), spent, " LIVE " FROM budget_spend"
	" WHERE scope = ? AND scope_id = ? AND period = ? AND period_start = ? FOR UPDATE";
static const char SQL_TAKE[] =
	"UPDATE budget_spend SET inflight = " LIVE " + 1, inflight_until ="
	" GREATEST(IF(inflight_until > NOW(3), inflight_until, NOW(3)), NOW(3) + INTERVAL ? SECOND)"
	" WHERE scope = ? AND scope_id = ? AND period = ? AND period_start = ?";

static const char *const SCOPE_WORDS[] = {"your", "the agent's", "the API key's"};

static void add_rows(ah_budget_hold *h, int s, const char *id, const char *day, const char *month,
                     const char *day_limit, const char *month_limit)
{
	h->rows[h->n++] = (ah_budget_row){ah_spend_scope_names[s], id, AH_PERIOD_S_DAY, day, day_limit};
	h->rows[h->n++] = (ah_budget_row){ah_spend_scope_names[s], id, AH_PERIOD_S_MONTH, month, month_limit};
}

/* The call's rows in a fixed order (user, agent, key; day, month): every
 * transaction locks them in it. */
static int load_rows(ah_req *r, const char *agent_id, const ah_budget_limits *k, const periods *p,
                     ah_budget_hold *h)
{
	ah_rows rows;
	const char *day = ah_strdup(r->arena, p->day), *month = ah_strdup(r->arena, p->month);
	h->n = 0;
	if (k) {
		add_rows(h, 0, r->user->id, day, month, k->user_day, k->user_month);
		add_rows(h, 1, agent_id, day, month, k->agent_day, k->agent_month);
		if (r->api_key_id)
			add_rows(h, 2, r->api_key_id, day, month, k->key_day, k->key_month);
		return 0;
	}
	if (ah_db_query(r->db, r->arena, &rows, SQL_LIMITS, "sss", r->user->id, agent_id,
	                r->api_key_id ? r->api_key_id : "") != 0)
		return AH_EFAIL;
	for (int s = 0; s < 3; s++)
		for (size_t i = 0; i < rows.n; i++)
			if (strcmp(rows.v[i][0], ah_spend_scope_names[s]) == 0)
				add_rows(h, s, rows.v[i][1], day, month, rows.v[i][2], rows.v[i][3]);
	return 0;
}

static int scope_index(const char *scope)
{
	return scope[0] == 'u' ? 0 : scope[0] == 'a' ? 1 : 2;
}

/* The 402 of a call refused by row b (spent: its spend; inflight: calls in
 * flight when only they hold the rest). */
static int refuse(ah_req *r, const ah_budget_row *b, const periods *p, const char *spent,
                  long long inflight)
{
	time_t reset = strcmp(b->period, "day") == 0 ? p->day_end : p->month_end;
	const char *when = iso_time(r, reset), *lim = ah_money_normalise(r->arena, b->limit);
	const char *who = SCOPE_WORDS[scope_index(b->scope)];
	const char *per = strcmp(b->period, "day") == 0 ? "daily" : "monthly";
	json_object *body = json_object_new_object(), *o = json_object_new_object();
	if (inflight > 0) {
		ah_json_str(body, "detail", ah_sprintf(r->arena, "Budget nearly spent: the rest of %s %s budget "
		            "of %s USD is held by %lld call(s) in flight; try again when they end (it resets "
		            "at %s)", who, per, lim, inflight, when));
		ah_json_str(body, "code", "budget_held");
	} else {
		ah_json_str(body, "detail", ah_sprintf(r->arena, "Budget exceeded: %s %s budget of %s USD is "
		            "spent (%s USD); it resets at %s", who, per, lim,
		            ah_money_normalise(r->arena, spent), when));
		ah_json_str(body, "code", "budget_exceeded");
	}
	ah_json_str(o, "scope", b->scope);
	ah_json_str(o, "scope_id", b->id);
	ah_json_str(o, "period", b->period);
	json_object_object_add(o, "limit_usd", ah_money_json(r->arena, b->limit));
	json_object_object_add(o, "spent_usd", ah_money_json(r->arena, spent));
	ah_json_str(o, "resets_at", when);
	json_object_object_add(body, "budget", o);
	long long secs = inflight > 0 ? HELD_RETRY_S : (long long)(reset - time(NULL));
	ah_header(r, "Retry-After", ah_sprintf(r->arena, "%lld", secs > 0 ? secs : 1));
	return ah_reply_json(r, 402, body) == 0 ? AH_EDONE : AH_EFAIL;
}

/* The budgeted rows made to exist, each its own statement before the
 * transaction: an INSERT IGNORE that finds the row takes a shared lock on it,
 * and two calls holding that and both asking for the exclusive one would be
 * a deadlock. */
static int make_rows(ah_req *r, const ah_budget_hold *h)
{
	for (int i = 0; i < h->n; i++) {
		const ah_budget_row *b = &h->rows[i];
		if (b->limit && ah_db_exec(r->db, NULL, SQL_ROW, "ssssssss", b->scope, b->id, b->period,
		                           b->start, b->scope, b->id, b->period, b->start) != 0)
			return AH_EFAIL;
	}
	return 0;
}

/* One transaction: every budgeted row locked (exclusively, in the fixed
 * order), checked, and taken. Of several spent budgets the one that resets
 * last is named (a month's). */
static int admit_once(ah_req *r, long long timeout_s, const periods *p, ah_budget_hold *h)
{
	int bad = -1;
	ah_rows st, worst = {0};
	if (make_rows(r, h) != 0 || ah_db_begin(r->db) != 0)
		return AH_EFAIL;
	for (int i = 0; i < h->n; i++) {
		const ah_budget_row *b = &h->rows[i];
		if (!b->limit)
			continue;
		if (ah_db_query(r->db, r->arena, &st, SQL_LOCK, "ssssss", b->limit, b->limit, b->scope, b->id,
		                b->period, b->start) != 0 || st.n != 1)
			goto fail;
		bool over = ah_cell_ll(st.v[0][0]) != 0, held = ah_cell_ll(st.v[0][1]) != 0;
		bool worse = bad < 0 || over > (ah_cell_ll(worst.v[0][0]) != 0) ||
		             (over == (ah_cell_ll(worst.v[0][0]) != 0) && strcmp(b->period, "month") == 0);
		if ((over || held) && worse) {
			bad = i;
			worst = st;
		}
	}
	if (bad >= 0) {
		ah_db_rollback(r->db);
		bool over = ah_cell_ll(worst.v[0][0]) != 0;
		return refuse(r, &h->rows[bad], p, worst.v[0][2], over ? 0 : ah_cell_ll(worst.v[0][3]));
	}
	for (int i = 0; i < h->n; i++) {
		const ah_budget_row *b = &h->rows[i];
		if (b->limit && ah_db_exec(r->db, NULL, SQL_TAKE, "issss", timeout_s + 60, b->scope, b->id,
		                           b->period, b->start) != 0)
			goto fail;
	}
	if (ah_db_commit(r->db) == 0)
		return 0;
fail:
	ah_db_rollback(r->db);
	return AH_EFAIL;
}

int ah_budget_admit(ah_req *r, const char *agent_id, const ah_budget_limits *known,
                    long long timeout_s, ah_budget_hold *h)
{
	periods p;
	periods_now(&p);
	memset(h, 0, sizeof *h);
	if (load_rows(r, agent_id, known, &p, h) != 0)
		return AH_EFAIL;
	bool any = false;
	for (int i = 0; i < h->n; i++)
		any |= h->rows[i].limit != NULL;
	if (!any)
		return 0; /* nothing to hold: the call is only charged */
	int rc = AH_EFAIL;
	for (int tries = 0; tries < 4; tries++) {
		rc = admit_once(r, timeout_s, &p, h);
		if (rc != AH_EFAIL || !ah_db_deadlocked(r->db))
			break;
		usleep(10000u << tries); /* a cluster's certification conflict, say */
	}
	h->held = rc == 0;
	return rc;
}

json_object *ah_budget_spec(ah_req *r, const ah_budget_hold *h)
{
	if (!h->held)
		return NULL;
	json_object *a = ah_json_own(r, json_object_new_array());
	for (int i = 0; i < h->n; i++) {
		const ah_budget_row *b = &h->rows[i];
		json_object *o = json_object_new_object();
		ah_json_str(o, "scope", b->scope);
		ah_json_str(o, "id", b->id);
		ah_json_str(o, "period", b->period);
		ah_json_str(o, "start", b->start);
		ah_json_str(o, "limit", b->limit);
		json_object_array_add(a, o);
	}
	return a;
}

/* ---- charging ---- */

#define CHARGE_ROW "(?, ?, ?, ?, CAST(? AS DECIMAL(24,12)), ?, CAST(? AS DECIMAL(24,12)))"
#define CHARGE_TAIL                                                                          \
	" ON DUPLICATE KEY UPDATE spent = spent + VALUES(spent),"                                \
	" inflight = GREATEST(inflight - VALUES(inflight), 0), max_call = GREATEST(max_call, VALUES(max_call))"
#define CHARGE_HEAD "INSERT INTO budget_spend (scope, scope_id, period, period_start, spent, inflight, max_call) VALUES "
/* A call's 4 rows (no API key: a JWT) or 6: one statement, one round trip,
 * locking the rows in the order admission does. */
static const char SQL_CHARGE4[] =
	CHARGE_HEAD CHARGE_ROW ", " CHARGE_ROW ", " CHARGE_ROW ", " CHARGE_ROW CHARGE_TAIL;
static const char SQL_CHARGE6[] = CHARGE_HEAD CHARGE_ROW ", " CHARGE_ROW ", " CHARGE_ROW ", " CHARGE_ROW
	", " CHARGE_ROW ", " CHARGE_ROW CHARGE_TAIL;
#define ROW_FMT "sssssis"
#define ROW_ARGS(k) h->rows[k].scope, h->rows[k].id, h->rows[k].period, h->rows[k].start, rest, rel[k], cost

/* What is left to charge: the cost less what the gateway charged. */
static const char *rest_of(ah_req *r, const char *cost, long long charged)
{
	long long pico = 0;
	if (ah_money_parse(&pico, cost) != 0)
		ah_log_error("budget: cannot read the cost %s", cost);
	return ah_money_text(r->arena, pico > charged ? pico - charged : 0);
}

/* Row i gives back the place at the edge its admission took. */
static bool releases(const ah_budget_hold *h, int i)
{
	return h->held && h->rows[i].limit;
}

static bool row_is(const ah_budget_hold *h, int i, ah_spend_scope s)
{
	return strcmp(h->rows[i].scope, ah_spend_scope_names[s]) == 0;
}

bool ah_budget_charge_of(ah_req *r, const ah_budget_hold *h, const char *cost, long long charged,
                         ah_budget_charge *ch)
{
	if ((h->n != 4 && h->n != 6) || !row_is(h, 0, AH_SPEND_USER) || !row_is(h, 2, AH_SPEND_AGENT) ||
	    (h->n == 6 && !row_is(h, 4, AH_SPEND_KEY)))
		return false;
	*ch = (ah_budget_charge){h->rows[0].start, h->rows[1].start, h->n == 6 ? h->rows[4].id : NULL,
	                         rest_of(r, cost, charged), 0};
	for (int i = 0; i < h->n; i++)
		ch->release |= releases(h, i) << i;
	return true;
}

/* An admitted row exists, so its inflight (given as 1) is released, never
 * inserted; every other row gets 0. */
void ah_budget_finish(ah_req *r, const ah_budget_hold *h, const char *cost, long long charged)
{
	long long rel[6] = {0};
	const char *rest = rest_of(r, cost, charged);
	for (int i = 0; i < h->n; i++)
		rel[i] = releases(h, i);
	int rc = AH_EFAIL;
	for (int tries = 0; tries < 3 && rc != 0; tries++) {
		if (h->n == 4)
			rc = ah_db_exec(r->db, NULL, SQL_CHARGE4, ROW_FMT ROW_FMT ROW_FMT ROW_FMT, ROW_ARGS(0),
			                ROW_ARGS(1), ROW_ARGS(2), ROW_ARGS(3));
		else if (h->n == 6)
			rc = ah_db_exec(r->db, NULL, SQL_CHARGE6, ROW_FMT ROW_FMT ROW_FMT ROW_FMT ROW_FMT ROW_FMT,
			                ROW_ARGS(0), ROW_ARGS(1), ROW_ARGS(2), ROW_ARGS(3), ROW_ARGS(4), ROW_ARGS(5));
		else
			return; /* the user or the agent was deleted during the call */
		if (rc != 0 && !ah_db_deadlocked(r->db))
			break;
	}
	if (rc != 0)
		ah_log_error("budget: cannot charge %s: %s", rest, ah_db_error(r->db));
}

/* ---- GET /usage ---- */

#define SPENT_JOIN(t, col, per)                                                                  \
	" LEFT JOIN budget_spend " per " ON " per ".scope = '" t "' AND " per ".scope_id = " col        \
	" AND " per ".period = '" per "' AND " per ".period_start = ?"
#define BUDGET_COLS(x) x ".max_cost_usd_per_day, " x ".max_cost_usd_per_month, day.spent, month.spent"
#define HAS_LIMIT(x) " AND (" x ".max_cost_usd_per_day IS NOT NULL OR " x ".max_cost_usd_per_month IS NOT NULL)"
static const char SQL_BUDGETS[] =
	"SELECT 'user', u.id, u.email, " BUDGET_COLS("u") " FROM users u" SPENT_JOIN("user", "u.id", "day")
	SPENT_JOIN("user", "u.id", "month") " WHERE u.id = ?" HAS_LIMIT("u")
	" UNION ALL SELECT 'agent', a.id, a.slug, " BUDGET_COLS("a") " FROM agents a"
	SPENT_JOIN("agent", "a.id", "day") SPENT_JOIN("agent", "a.id", "month")
	" WHERE a.user_id = ?" HAS_LIMIT("a")
	" UNION ALL SELECT 'key', k.id, k.name, " BUDGET_COLS("k") " FROM api_keys k"
	SPENT_JOIN("key", "k.id", "day") SPENT_JOIN("key", "k.id", "month")
	" WHERE k.user_id = ?" HAS_LIMIT("k");

static json_object *usage_item(ah_req *r, char *const *v, bool day, const periods *p)
{
	const char *lim = v[day ? 3 : 4], *spent = v[day ? 5 : 6];
	long long l = 0, s = 0;
	ah_money_parse(&l, lim);
	if (spent)
		ah_money_parse(&s, spent);
	json_object *o = json_object_new_object();
	ah_json_str(o, "scope", v[0]);
	ah_json_str(o, "scope_id", v[1]);
	ah_json_str(o, "name", v[2]);
	ah_json_str(o, "period", day ? "day" : "month");
	json_object_object_add(o, "limit_usd", ah_money_json(r->arena, lim));
	json_object_object_add(o, "spent_usd", ah_money_json(r->arena, spent));
	json_object_object_add(o, "remaining_usd",
	                       ah_money_json(r->arena, ah_money_text(r->arena, l > s ? l - s : 0)));
	ah_json_str(o, "resets_at", iso_time(r, day ? p->day_end : p->month_end));
	return o;
}

int ah_budget_usage(ah_req *r, json_object *out)
{
	periods p;
	ah_rows rows;
	periods_now(&p);
	if (ah_db_query(r->db, r->arena, &rows, SQL_BUDGETS, "sssssssss", p.day, p.month, r->user->id,
	                p.day, p.month, r->user->id, p.day, p.month, r->user->id) != 0)
		return AH_EFAIL;
	json_object *a = json_object_new_array();
	for (size_t i = 0; i < rows.n; i++)
		for (int day = 1; day >= 0; day--)
			if (rows.v[i][day ? 3 : 4])
				json_object_array_add(a, usage_item(r, rows.v[i], day, &p));
	json_object_object_add(out, "budgets", a);
	return 0;
}
