/* Exact money for usage and cost. */
#ifndef AH_CORE_MONEY_H
#define AH_CORE_MONEY_H

#include <json-c/json.h>

#include "core/arena.h"

/* Amounts are integers of pico-dollars (1e-12 USD, the scale of the DECIMAL(24,12)
 * columns) so that sums are exact; prices are micro-dollars per million tokens,
 * which makes the cost of one token exactly price pico-dollars. */

/* "3.00" → 3000000. Up to 6 digits of dollars and 6 decimals, no sign, no
 * exponent: AH_EINVALID else. */
int ah_price_parse(long long *out, const char *s);
/* in_tok × in_price + out_tok × out_price, AH_EINVALID on overflow. */
int ah_cost_pico(long long *out, long long in_tok, long long out_tok,
                 long long in_price, long long out_price);
/* *acc += tokens × price (one more kind of token), AH_EINVALID on overflow or
 * a negative count. */
int ah_cost_add(long long *acc, long long tokens, long long price);
/* Decimal money text ("0.000117", "-2", "1.500000000000": up to 12
 * decimals, the DECIMAL(24,12) columns') → pico-dollars; AH_EINVALID else. */
int ah_money_parse(long long *pico, const char *s);
/* Pico-dollars as decimal text without needless zeros: "0.000117", "2.0". */
char *ah_money_text(ah_arena *a, long long pico);
/* DECIMAL text from the database ("0.000117000000", NULL = 0) normalised the same way. */
char *ah_money_normalise(ah_arena *a, const char *dec);
/* A JSON number that prints exactly as the (normalised) decimal text. */
json_object *ah_money_json(ah_arena *a, const char *dec);

#endif
