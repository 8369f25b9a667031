/* usage [--days N] [--daily]: the user's consumption, with a daily sparkline
 * of invocations on a terminal. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

static const struct ah_cli_col usage_cols[] = {
	{"period days", "period_days", AH_COL_NUM},
	{"from", "start_date", AH_COL_TEXT},
	{"to", "end_date", AH_COL_TEXT},
	{"invocations", "total_invocations", AH_COL_NUM},
	{"input tokens", "input_tokens", AH_COL_NUM},
	{"output tokens", "output_tokens", AH_COL_NUM},
	{"model input tokens", "model_input_tokens", AH_COL_NUM},
	{"model output tokens", "model_output_tokens", AH_COL_NUM},
	{"cost usd", "total_cost_usd", AH_COL_NUM},
	{0},
};

static const struct ah_cli_col daily_cols[] = {
	{"date", "date", AH_COL_TEXT},
	{"invocations", "invocations", AH_COL_NUM},
	{"input tokens", "input_tokens", AH_COL_NUM},
	{"output tokens", "output_tokens", AH_COL_NUM},
	{"model input tokens", "model_input_tokens", AH_COL_NUM},
	{"model output tokens", "model_output_tokens", AH_COL_NUM},
	{"cost usd", "total_cost_usd", AH_COL_NUM},
	{0},
};

/* What each budget (yours, your agents', your keys') has left. */
static const struct ah_cli_col budget_cols[] = {
	{"budget of", "scope", AH_COL_TEXT},
	{"name", "name", AH_COL_TEXT},
	{"period", "period", AH_COL_TEXT},
	{"limit usd", "limit_usd", AH_COL_NUM},
	{"spent usd", "spent_usd", AH_COL_NUM},
	{"remaining usd", "remaining_usd", AH_COL_NUM},
	{"resets", "resets_at", AH_COL_TIME},
	{0},
};

void ah_cli_budget_fields(const struct ah_cli_budget *b, json_object *body)
{
	const struct { const char *v, *field; } map[] = {{b->max_day, "max_cost_usd_per_day"},
	                                                 {b->max_month, "max_cost_usd_per_month"}};
	for (int i = 0; i < 2; i++)
		if (map[i].v) /* as text: the API takes the digits exactly */
			json_object_object_add(body, map[i].field, strcmp(map[i].v, "none") == 0 ? NULL
			                       : json_object_new_string(map[i].v));
}

struct usage_opts {
	struct ah_cli_budget budget;
	struct ah_cli_int days;
	bool daily;
};

static void show_budgets(struct ah_cli *c, json_object *usage)
{
	json_object *b = NULL;
	if (!json_object_object_get_ex(usage, "budgets", &b) || !json_object_is_type(b, json_type_array) ||
	    json_object_array_length(b) == 0)
		return;
	printf("\nbudgets:\n");
	ah_cli_show(c, b, budget_cols);
}

/* budget [--max-day USD] [--max-month USD]: your own spend limits. */
static int run_budget(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	json_object *body = ah_cli_obj(c);
	ah_cli_budget_fields(&((const struct usage_opts *)a->opts)->budget, body);
	int rc = json_object_object_length(body) ? ah_cli_send(c, "PATCH", "/users/me", body, &r, err)
	                                         : ah_cli_get(c, "/users/me", &r, err);
	if (!rc)
		ah_cli_show(c, r.body, (const struct ah_cli_col[]){{"email", "email", AH_COL_TEXT},
		                                                    AH_CLI_BUDGET_COLS, {0}});
	return rc;
}

/* One block character per day, scaled to the busiest day. */
static void sparkline(struct ah_cli *c, json_object *items)
{
	static const char *const bars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
	size_t n = json_object_array_length(items);
	int64_t max = 0;
	for (size_t i = 0; i < n; i++) {
		json_object *v;
		json_object_object_get_ex(json_object_array_get_idx(items, i), "invocations", &v);
		max = json_object_get_int64(v) > max ? json_object_get_int64(v) : max;
	}
	printf("per day:     ");
	for (size_t i = 0; i < n; i++) {
		json_object *v;
		json_object_object_get_ex(json_object_array_get_idx(items, i), "invocations", &v);
		int64_t k = json_object_get_int64(v);
		fputs(k == 0 ? " " : bars[max ? (k * 7) / max : 0], stdout);
	}
	printf("  (oldest to today; highest %lld)\n", (long long)max);
	(void)c;
}

static int run_usage(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const struct usage_opts *o = a->opts;
	long long days = o->days.set ? o->days.n : 30;
	struct ah_cli_resp r, d;
	bool daily = o->daily;
	int rc = ah_cli_get(c, ah_sprintf(c->a, "/usage%s?days=%lld", daily ? "/daily" : "", days), &r, err);
	if (rc)
		return rc;
	json_object *items = NULL;
	if (daily) {
		if (!json_object_object_get_ex(r.body, "items", &items) || !json_object_is_type(items, json_type_array))
			return ah_err_set(err, AH_EFAIL, "the daily usage has no items");
		ah_cli_show(c, c->json ? r.body : items, daily_cols);
		return 0;
	}
	ah_cli_show(c, r.body, usage_cols);
	if (c->json)
		return 0;
	show_budgets(c, r.body);
	if (!c->tty_out)
		return 0;
	rc = ah_cli_get(c, ah_sprintf(c->a, "/usage/daily?days=%lld", days), &d, err);
	if (!rc && json_object_object_get_ex(d.body, "items", &items) && json_object_is_type(items, json_type_array))
		sparkline(c, items);
	return rc;
}

const struct ah_cli_cmd ah_cli_usage_cmds[] = {
	{"usage", NULL, "invocations, tokens and cost over the last days", 0, 0, false, run_usage,
	 {AH_OPT_INT("days", 0, "N", 1, 365, struct usage_opts, days, "the last N days, 1-365 (default 30)"),
	  AH_OPT_BOOL("daily", 0, struct usage_opts, daily, "one row per day")},
	 sizeof(struct usage_opts)},
	{"budget", NULL, "show or set your own spend limits", 0, 0, false, run_budget,
	 {AH_CLI_BUDGET_OPTS(struct usage_opts, budget)}, sizeof(struct usage_opts)},
	{0},
};
