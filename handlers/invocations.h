/* Invocations as the API shows them, shared by invoke (the live result), the
 * history (rows read back) and usage (money): the contract's invocation result,
 * exact decimal money and the UTF-8 repair that keeps a response JSON-safe. */
#ifndef AH_HANDLERS_INVOCATIONS_H
#define AH_HANDLERS_INVOCATIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/money.h"
#include "http/http.h"

/* The invocations.status ENUM of schema/002_invocations.sql (024 added
 * cancelled), in its order. */
typedef enum ah_invocation_status { AH_INV_COMPLETED, AH_INV_FAILED, AH_INV_CANCELLED } ah_invocation_status;
extern const char *const ah_invocation_status_names[];

/* One invocation, either just recorded or read back from the invocations table. */
typedef struct ah_invocation {
	const char *id, *session_id, *sandbox_id, *error;
	ah_invocation_status status;
	const char *created_at;   /* DB DATETIME(3) text, UTC */
	const char *cost;         /* exact decimal text, e.g. "0.000117" or "0.000117000000" */
	const char *response;     /* raw stdout bytes; NULL = none */
	size_t response_len;
	const char *prompt;       /* raw prompt bytes */
	size_t prompt_len;
	long long input_tokens, output_tokens, duration_ms;
	/* What the model provider reported through the model gateway (decimal
	 * text); NULL when not measured (the gateway is off). */
	const char *model_input_tokens, *model_output_tokens;
	/* Its phases as a JSON object's text (invoke_timing.h), or NULL. */
	const char *timing;
	/* Why some files the agent wrote were not kept (invoke_files.c), or NULL. */
	const char *files_error;
	/* Its logs: the redacted end of its stderr (invocation_logs.c), written
	 * with the history row; none when both are 0. */
	const char *err_log;
	size_t err_log_len;
	bool err_log_truncated;
	/* The parts of model_input_tokens the provider prices apart (cache
	 * writes and reads): for the cost only, not recorded. */
	long long model_cache_write_tokens, model_cache_read_tokens;
	long long model_cache_write_1h_tokens; /* the part of the writes kept an hour */
	/* The schedule that started it (its trigger is "schedule"); NULL: a
	 * client's call ("api"). */
	const char *schedule_id;
} ah_invocation;

/* The history's columns of invocations i, and one row of them as the
 * history shows it (with its prompt). (sessions.c) */
#define AH_HISTORY_COLS                                                                    \
	"i.id, i.session_id, i.sandbox_id, i.prompt, i.response_content, i.input_tokens,"  \
	" i.output_tokens, i.total_cost_usd, i.duration_ms, i.status, i.error, i.created_at," \
	" i.model_input_tokens, i.model_output_tokens, i.prompt_sha256, i.response_sha256, i.files_error," \
	" i.schedule_id, i.timing"
json_object *ah_invocation_row_json(ah_req *r, const ah_rows *rows, size_t i);

/* The contract's invocation result; with_prompt adds "prompt" (history).
 * (sessions.c) */
json_object *ah_invocation_json(ah_req *r, const ah_invocation *inv, bool with_prompt);

/* Tokens and exact cost of what the caller receives (invoke.c): sets
 * output_tokens and cost from response, input_tokens and the model counts. */
void ah_invocation_account(ah_req *r, ah_invocation *inv);

/* Writes the invocation's history row, retried; if it cannot be written (its
 * agent was deleted during the call), the user's usage is still counted.
 * budget: the call's budgets, charged inv->cost less what the model gateway
 * charged (pico-dollars) in the same transaction; NULL: no charge (a call
 * that never ran a sandbox's). (invoke_record.c) */
struct ah_budget_hold;
void ah_invocation_record(ah_req *r, const char *agent_id, const ah_invocation *inv,
                          const struct ah_budget_hold *budget, long long gateway_charged);

/* POST /agents/{slug}/invoke with r's body, answered on r: a client's call
 * (schedule_id NULL) or a schedule's tick. *inv_id: the invocation recorded,
 * left alone when none was. (invoke.c) */
int ah_invoke(ah_req *r, const char *schedule_id, const char **inv_id);

/* "YYYY-MM-DD HH:MM:SS.mmm" (UTC) for DATETIME(3) columns. */
char *ah_db_time(ah_arena *a, int64_t ms);

#endif
