/* Invocations as the API shows them, shared by invoke (the live result), the
 * history (rows read back) and usage (money): the contract's invocation result,
 * exact decimal money and the UTF-8 repair that keeps a response JSON-safe. */
#ifndef AH_HANDLERS_INVOCATIONS_H
#define AH_HANDLERS_INVOCATIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "http/http.h"

/* One invocation, either just recorded or read back from the invocations table. */
typedef struct ah_invocation {
	const char *id, *session_id, *sandbox_id, *status, *error;
	const char *created_at;   /* DB DATETIME(3) text, UTC */
	const char *cost;         /* exact decimal text, e.g. "0.000117" or "0.000117000000" */
	const char *response;     /* raw stdout bytes; NULL = none */
	size_t response_len;
	const char *prompt;       /* raw prompt bytes (history only) */
	size_t prompt_len;
	long long input_tokens, output_tokens, duration_ms;
} ah_invocation;

/* The contract's invocation result; with_prompt adds "prompt" (history).
 * (sessions.c) */
json_object *ah_invocation_json(ah_req *r, const ah_invocation *inv, bool with_prompt);

/* len bytes as valid UTF-8: each maximal invalid subsequence becomes U+FFFD, as
 * browsers decode. Returns s itself when it is valid already. (sessions.c) */
const char *ah_utf8_repair(ah_arena *a, const char *s, size_t len, size_t *outlen);

/* ---- money (usage.c) ----
 * Amounts are integers of pico-dollars (1e-12 USD, the scale of the DECIMAL(24,12)
 * columns) so that sums are exact; prices are micro-dollars per million tokens,
 * which makes the cost of one token exactly price pico-dollars. */

/* "3.00" → 3000000. Up to 6 digits of dollars and 6 decimals, no sign, no
 * exponent: AH_EINVALID else. */
int ah_price_parse(long long *out, const char *s);
/* in_tok × in_price + out_tok × out_price, AH_EINVALID on overflow. */
int ah_cost_pico(long long *out, long long in_tok, long long out_tok,
                 long long in_price, long long out_price);
/* Pico-dollars as decimal text without needless zeros: "0.000117", "2.0". */
char *ah_money_text(ah_arena *a, long long pico);
/* DECIMAL text from the database ("0.000117000000", NULL = 0) normalised the same way. */
char *ah_money_normalise(ah_arena *a, const char *dec);
/* A JSON number that prints exactly as the (normalised) decimal text. */
json_object *ah_money_json(ah_arena *a, const char *dec);

#endif
