/* The model gateway's part in spend limits (issue 32; the API's side is
 * handlers/budgets.h). A run request of a call with a budget carries its
 * spend rows ("budget": scope, id, period, its first day, its limit or
 * null). Each model answer's cost, priced as the API prices the call, is
 * added to every row in MariaDB at once (`spent = spent + ?`), so other calls
 * on other runners see it; before each request and after each charge the
 * rows with a limit are read, and once one is spent the invocation's model
 * access ends: later requests get a provider-style 402 billing_error. The
 * API charges the call only what the gateway did not. */
#include "runner/gateway_int.h"

#include "core/json.h"
#include "core/log.h"
#include "core/money.h"
#include "db/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS_MAX 6

struct gw_budget {
	pthread_mutex_t mu;        /* one statement at a time on db */
	const ah_config *cfg;
	ah_db *db;                 /* opened at the first use */
	int n;
	struct {
		char scope[8], id[40], period[8], start[12], limit[24];
		bool has_limit;
	} rows[ROWS_MAX];
	long long pin, pout, pcw, pcw1h, pcr; /* prices: pico-dollars per token */
	long long charged;         /* pico-dollars added to the rows */
	bool db_logged;            /* a database failure is logged once per invocation */
};

static bool copy(char *dst, size_t cap, const char *src)
{
	if (!src || strlen(src) >= cap || strspn(src, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                                               "0123456789_-.") != strlen(src))
		return false;
	memcpy(dst, src, strlen(src) + 1);
	return true;
}

static int parse_row(struct gw_budget *b, json_object *o, ah_err *err)
{
	json_object *lim = NULL;
	int i = b->n;
	if (!json_object_is_type(o, json_type_object) ||
	    !copy(b->rows[i].scope, sizeof b->rows[i].scope, ah_json_get_str(o, "scope")) ||
	    !copy(b->rows[i].id, sizeof b->rows[i].id, ah_json_get_str(o, "id")) ||
	    !copy(b->rows[i].period, sizeof b->rows[i].period, ah_json_get_str(o, "period")) ||
	    !copy(b->rows[i].start, sizeof b->rows[i].start, ah_json_get_str(o, "start")))
		return ah_err_set(err, AH_EINVALID, "invalid budget row");
	json_object_object_get_ex(o, "limit", &lim);
	b->rows[i].has_limit = lim != NULL;
	if (lim && !copy(b->rows[i].limit, sizeof b->rows[i].limit, json_object_get_string(lim)))
		return ah_err_set(err, AH_EINVALID, "invalid budget limit");
	b->n++;
	return 0;
}

int gw_budget_load(struct gw_budget **out, const ah_config *cfg, json_object *spec, ah_err *err)
{
	*out = NULL;
	if (!spec)
		return 0;
	size_t n = json_object_is_type(spec, json_type_array) ? json_object_array_length(spec) : 0;
	if (n == 0 || n > ROWS_MAX)
		return ah_err_set(err, AH_EINVALID, "invalid budget");
	struct gw_budget *b = calloc(1, sizeof *b);
	if (!b)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	pthread_mutex_init(&b->mu, NULL);
	b->cfg = cfg;
	/* The prices the API bills a call at (parsed once, at load). */
	const ah_price_settings *p = &ah_settings_of(cfg)->price;
	b->pin = p->input, b->pout = p->output, b->pcw = p->cache_write;
	b->pcw1h = p->cache_write_1h, b->pcr = p->cache_read;
	for (size_t i = 0; i < n; i++)
		if (parse_row(b, json_object_array_get_idx(spec, i), err) != 0) {
			gw_budget_free(b);
			return AH_EINVALID;
		}
	*out = b;
	return 0;
}

void gw_budget_free(struct gw_budget *b)
{
	if (!b)
		return;
	ah_db_close(b->db);
	pthread_mutex_destroy(&b->mu);
	free(b);
}

long long gw_budget_charged(const struct gw_budget *b)
{
	return b ? b->charged : 0;
}

/* The cost of one answer's usage, as the API prices a call (invoke.c
 * model_cost): the sum over answers is the call's cost, exactly. */
static long long answer_cost(const struct gw_budget *b, const ah_gateway_usage *u)
{
	long long in = u->input_tokens, cw = u->cache_write_tokens, cr = u->cache_read_tokens;
	long long cw1h = u->cache_write_1h_tokens, pico = 0;
	cw = cw > 0 && cw <= in ? cw : 0;
	cr = cr > 0 && cr <= in - cw ? cr : 0;
	cw1h = cw1h > 0 && cw1h <= cw ? cw1h : 0;
	if (ah_cost_add(&pico, in - cw - cr, b->pin) != 0 || ah_cost_add(&pico, cw - cw1h, b->pcw) != 0 ||
	    ah_cost_add(&pico, cw1h, b->pcw1h) != 0 || ah_cost_add(&pico, cr, b->pcr) != 0 ||
	    ah_cost_add(&pico, u->output_tokens > 0 ? u->output_tokens : 0, b->pout) != 0)
		return 0;
	return pico;
}

static bool db_ready(struct gw_budget *b, const char *tag)
{
	ah_err err = {0};
	if (b->db || ah_db_open(&b->db, b->cfg, &err) == 0)
		return true;
	if (!b->db_logged) /* an agent's requests must not flood the log */
		ah_log_error("%s model gateway: budget: no database: %s", tag, err.msg);
	b->db_logged = true;
	b->db = NULL;
	return false;
}

static const char SQL_CHARGE[] =
	"INSERT INTO budget_spend (scope, scope_id, period, period_start, spent, max_call)"
	" VALUES (?, ?, ?, ?, CAST(? AS DECIMAL(24,12)), 0) ON DUPLICATE KEY UPDATE spent = spent + VALUES(spent)";
static const char SQL_SPENT[] =
	"SELECT spent >= CAST(? AS DECIMAL(12,6)), spent FROM budget_spend"
	" WHERE scope = ? AND scope_id = ? AND period = ? AND period_start = ?";

static const char *scope_word(const char *scope)
{
	return scope[0] == 'u' ? "the user's" : scope[0] == 'a' ? "the agent's" : "the API key's";
}

/* Under b->mu: the first spent row, described into why; false when none
 * (or the database cannot say: fail open, the API's admission still holds). */
static bool spent_locked(struct gw_budget *b, char *why, size_t cap)
{
	ah_arena *a = ah_arena_new();
	bool over = false;
	for (int i = 0; a && i < b->n && !over; i++) {
		ah_rows rows;
		if (!b->rows[i].has_limit ||
		    ah_db_query(b->db, a, &rows, SQL_SPENT, "sssss", b->rows[i].limit, b->rows[i].scope,
		                b->rows[i].id, b->rows[i].period, b->rows[i].start) != 0 || rows.n != 1)
			continue;
		over = ah_cell_ll(rows.v[0][0]) != 0;
		if (over)
			snprintf(why, cap, "%s %s budget of %s USD is spent (%s USD); it resets with the UTC %s",
			         scope_word(b->rows[i].scope), strcmp(b->rows[i].period, "day") ? "monthly" : "daily",
			         ah_money_normalise(a, b->rows[i].limit), ah_money_normalise(a, rows.v[0][1]),
			         b->rows[i].period);
	}
	ah_arena_destroy(a);
	return over;
}

bool gw_budget_spent(struct gw_budget *b, const char *tag, char *why, size_t cap)
{
	if (!b)
		return false;
	pthread_mutex_lock(&b->mu);
	bool over = db_ready(b, tag) && spent_locked(b, why, cap);
	pthread_mutex_unlock(&b->mu);
	return over;
}

bool gw_budget_charge(struct gw_budget *b, const ah_gateway_usage *u, const char *tag, char *why,
                      size_t cap)
{
	long long pico = b ? answer_cost(b, u) : 0;
	if (pico <= 0)
		return false;
	pthread_mutex_lock(&b->mu);
	bool over = false;
	if (db_ready(b, tag)) {
		ah_arena *a = ah_arena_new();
		const char *cost = a ? ah_money_text(a, pico) : NULL;
		int failed = 0;
		for (int i = 0; cost && i < b->n; i++)
			failed += ah_db_exec(b->db, NULL, SQL_CHARGE, "sssss", b->rows[i].scope, b->rows[i].id,
			                     b->rows[i].period, b->rows[i].start, cost) != 0;
		/* All rows or none is not promised: a row that failed is the API's to
		 * charge at the call's end (it charges what was not charged here). */
		if (cost && failed == 0)
			b->charged += pico;
		else
			ah_log_error("%s model gateway: budget: cannot charge %s: %s", tag, cost ? cost : "?",
			             ah_db_error(b->db));
		ah_arena_destroy(a);
		over = spent_locked(b, why, cap);
	}
	pthread_mutex_unlock(&b->mu);
	return over;
}
