/* Accounting and recording an invocation: its tokens and exact cost, then its
 * history row, whose trigger counts the user's daily usage and touches the
 * session in the same statement; with the agent's stderr and the call's
 * budgets' charge, one procedure call writes all of them in one transaction.
 * The usage (and the charge) alone when the history row cannot be written. */
#include "budgets.h"
#include "files_api.h"
#include "invocations.h"
#include "core/log.h"
#include "core/money.h"
#include "core/metrics.h"
#include "core/util.h"
#include "tokenize/tokenize.h"
#include "db/enums.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- accounting ---- */

/* The exact cost of the model's own counts (the model gateway): uncached
 * input, cache writes (5-minute and 1-hour) and cache reads each at their
 * price, and output. */
static int model_cost(const ah_price_settings *p, const ah_invocation *inv, long long *pico)
{
	long long cw = inv->model_cache_write_tokens, cr = inv->model_cache_read_tokens;
	long long cw1h = inv->model_cache_write_1h_tokens;
	*pico = 0;
	if (ah_cost_add(pico, ah_cell_ll(inv->model_input_tokens) - cw - cr, p->input) != 0 ||
	    ah_cost_add(pico, cw - cw1h, p->cache_write) != 0 ||
	    ah_cost_add(pico, cw1h, p->cache_write_1h) != 0 || ah_cost_add(pico, cr, p->cache_read) != 0)
		return AH_EINVALID;
	return ah_cost_add(pico, ah_cell_ll(inv->model_output_tokens), p->output);
}

/* Tokens and exact cost of what the caller receives: the prompt and the
 * response as returned (for a failure, what failed_output left), or, through
 * the model gateway, what the provider counted. Prices are checked and parsed
 * at load (core/config.c). */
void ah_invocation_account(ah_req *r, ah_invocation *inv)
{
	const ah_price_settings *p = &ah_settings_of(r->cfg)->price;
	long long pico = 0;
	size_t n = 0;
	if (inv->response && ah_tokenize_count(&n, inv->response, inv->response_len) != 0)
		ah_log_error("inv=%s: cannot count output tokens", inv->id);
	inv->output_tokens = (long long)n;
	int rc = inv->model_input_tokens && inv->model_output_tokens
	             ? model_cost(p, inv, &pico)
	             : ah_cost_pico(&pico, inv->input_tokens, inv->output_tokens, p->input, p->output);
	if (rc != 0)
		ah_log_error("inv=%s: cost overflows", inv->id);
	inv->cost = ah_money_text(r->arena, pico);
}

/* ---- recording ---- */

static const char SQL_RECORD[] =
	"INSERT INTO invocations (id, agent_id, user_id, session_id, sandbox_id, prompt,"
	" response_content, input_tokens, output_tokens, total_cost_usd, duration_ms, status, error,"
	" created_at, model_input_tokens, model_output_tokens, prompt_sha256, response_sha256, files_error,"
	" trigger_type, schedule_id, timing)"
	" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, IF(? IS NULL, " AH_SQ(AH_TRIGGER_S_API) ", " AH_SQ(AH_TRIGGER_S_SCHEDULE) "), ?, ?)";
/* SQL_RECORD's parameters, bound by ah_db_exec. */
#define RECORD_FORMAT "sssssbbiisisssssssssss"
/* The same row with its logs row (when the agent wrote to stderr) and its
 * budgets' charge (when it has one): one transaction, one round trip, the
 * procedure of schema/035 (four of START TRANSACTION, two INSERTs and COMMIT
 * cost a call with stderr ~0.3 ms more than one without: issue 29; the
 * charge was a round trip of its own). SQL_RECORD's parameters, then the
 * logs row's, then the charge's (NULLs: none). */
static const char SQL_FINISH[] = "CALL invocation_finish(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
	" ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
/* Only for an invocation whose history row cannot be written (its agent was
 * deleted during the call); otherwise the invocations_rollup trigger (schema/
 * 004) counts the usage and touches the session within SQL_RECORD itself. */
static const char SQL_USAGE[] =
	"INSERT INTO usage_daily (user_id, day, invocations, input_tokens, output_tokens, total_cost_usd,"
	" model_invocations, model_input_tokens, model_output_tokens)"
	" VALUES (?, ?, 1, ?, ?, ?, ? IS NOT NULL, COALESCE(?, 0), COALESCE(?, 0))"
	" ON DUPLICATE KEY UPDATE invocations = invocations + 1,"
	" input_tokens = input_tokens + VALUES(input_tokens),"
	" output_tokens = output_tokens + VALUES(output_tokens),"
	" total_cost_usd = total_cost_usd + VALUES(total_cost_usd),"
	" model_invocations = model_invocations + VALUES(model_invocations),"
	" model_input_tokens = model_input_tokens + VALUES(model_input_tokens),"
	" model_output_tokens = model_output_tokens + VALUES(model_output_tokens)";

/* The UTC day of usage_daily: the date part of the invocation's created_at. */
static void usage_day(char out[11], const char *created_at)
{
	snprintf(out, 11, "%.10s", created_at);
}

/* The hashes of the prompt and response kept in the file store, or NULL. */
typedef struct spilled {
	const char *prompt, *response;
} spilled;

/* The history row alone, or with its logs row and the charge ch (NULL:
 * none) in SQL_FINISH (SQL_RECORD's format leaves the arguments after its
 * own unread). */
static int record_once(ah_req *r, const char *agent_id, const ah_invocation *v, const spilled *s,
                       const ah_budget_charge *ch)
{
	bool finish = ch || v->err_log_len || v->err_log_truncated;
	const ah_budget_charge none = {0}, *c = ch ? ch : &none;
	return ah_db_exec(r->db, NULL, finish ? SQL_FINISH : SQL_RECORD,
	                  finish ? RECORD_FORMAT "bissssi" : RECORD_FORMAT, v->id, agent_id, r->user->id,
	                  v->session_id, v->sandbox_id, v->prompt, v->prompt_len, v->response,
	                  v->response_len, v->input_tokens, v->output_tokens, v->cost, v->duration_ms,
	                  ah_invocation_status_names[v->status], v->error, v->created_at,
	                  v->model_input_tokens, v->model_output_tokens, s->prompt, s->response,
	                  v->files_error, v->schedule_id, v->schedule_id, v->timing,
	                  v->err_log ? v->err_log : "", v->err_log_len, (long long)v->err_log_truncated,
	                  c->day, c->month, c->key_id, c->rest, (long long)c->release);
}

/* Bytes over AH_HISTORY_INLINE_MAX into the file store: the row keeps ""
 * and the hash. Kept in the row when the store fails (logged): the history
 * is never lost for it. */
static const char *spill(ah_req *r, const char *agent_id, const char *inv_id, const char **bytes,
                         size_t *len)
{
	char sha[65];
	ah_err err = {0};
	if (!*bytes || *len <= AH_HISTORY_INLINE_MAX || !ah_files_store())
		return NULL;
	if (ah_history_blob_put(r->db, ah_files_store(), r->arena, inv_id, agent_id, *bytes, *len, sha,
	                        &err) != 0) {
		ah_log_error("inv=%s: history kept in the row, the file store failed: %s", inv_id, err.msg);
		return NULL;
	}
	*bytes = "";
	*len = 0;
	return ah_strdup(r->arena, sha);
}

/* The prompt and response over AH_HISTORY_INLINE_MAX into the file store;
 * an echo's response is its prompt: one blob, one reference. */
static void spill_both(ah_req *r, const char *agent_id, ah_invocation *w, spilled *s)
{
	bool same = w->response && w->response_len == w->prompt_len && w->prompt &&
	            memcmp(w->response, w->prompt, w->prompt_len) == 0;
	s->prompt = spill(r, agent_id, w->id, &w->prompt, &w->prompt_len);
	if (same && s->prompt) {
		s->response = s->prompt;
		w->response = "";
		w->response_len = 0;
	} else {
		s->response = spill(r, agent_id, w->id, &w->response, &w->response_len);
	}
}

/* One statement (its own transaction, usage, session and the budgets'
 * charge included), retried: a deadlock with the runner's session updates
 * (or, on a cluster, a certification conflict on the spend rows) is possible
 * and harmless to repeat, and the primary key makes a repeat of one that did
 * commit fail. If the history row cannot be written (the agent was deleted
 * during the call), the user's usage is still counted and the budgets still
 * charged. */
void ah_invocation_record(ah_req *r, const char *agent_id, const ah_invocation *inv,
                          const ah_budget_hold *budget, long long gateway_charged)
{
	ah_invocation w = *inv, *v = &w;
	spilled s = {0};
	ah_budget_charge charge, *ch = NULL;
	if (budget && ah_budget_charge_of(r, budget, inv->cost, gateway_charged, &charge))
		ch = &charge;
	/* Counted as billed, whether or not its history row gets written. */
	ah_mx_invocation(inv->status == AH_INV_COMPLETED ? AH_MX_INV_COMPLETED : AH_MX_INV_FAILED,
	                 inv->duration_ms, inv->input_tokens, inv->output_tokens, inv->cost);
	spill_both(r, agent_id, &w, &s);
	for (int attempt = 0; attempt < 3; attempt++) {
		int rc = record_once(r, agent_id, v, &s, ch);
		/* A retry that finds the row: the attempt before committed, and only
		 * its answer was lost with the connection (a cluster node that went
		 * away mid-statement). Recorded once; the usage must not count twice,
		 * nor the budgets be charged twice. */
		if (rc == 0 || (rc == AH_ECONFLICT && attempt > 0)) {
			if (budget && !ch)
				ah_budget_finish(r, budget, inv->cost, gateway_charged);
			return;
		}
	}
	ah_log_error("inv=%s: cannot record the invocation: %s", v->id, ah_db_error(r->db));
	char day[11];
	usage_day(day, v->created_at);
	if (ah_db_exec(r->db, NULL, SQL_USAGE, "ssiissss", r->user->id, day, v->input_tokens,
	               v->output_tokens, v->cost, v->model_input_tokens, v->model_input_tokens,
	               v->model_output_tokens) != 0)
		ah_log_error("inv=%s: cannot count the usage either: %s", v->id, ah_db_error(r->db));
	if (budget)
		ah_budget_finish(r, budget, inv->cost, gateway_charged);
}

/* "YYYY-MM-DD HH:MM:SS.mmm" (UTC) for DATETIME(3) columns. */
char *ah_db_time(ah_arena *a, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char buf[32];
	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
	return ah_sprintf(a, "%s.%03d", buf, (int)(ms % 1000));
}

