/* Money as exact decimals: integer pico-dollars, never floats; see money.h. */
#include "core/money.h"
#include "core/err.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define PICO_PER_USD 1000000000000LL


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

int ah_cost_add(long long *acc, long long tokens, long long price)
{
	long long a;
	if (tokens < 0 || __builtin_mul_overflow(tokens, price, &a) ||
	    __builtin_add_overflow(*acc, a, acc))
		return AH_EINVALID;
	return 0;
}

int ah_money_parse(long long *pico, const char *s)
{
	bool neg = *s == '-';
	long long whole = 0, frac = 0;
	int fdigits = 0, wdigits = 0;
	const char *p = s + neg;
	for (; *p >= '0' && *p <= '9'; p++, wdigits++)
		if (__builtin_mul_overflow(whole, 10, &whole) || __builtin_add_overflow(whole, *p - '0', &whole))
			return AH_EINVALID;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++, fdigits++) {
			if (fdigits >= 12)
				return AH_EINVALID;
			frac = frac * 10 + (*p - '0');
		}
	if (*p != '\0' || (wdigits == 0 && fdigits == 0))
		return AH_EINVALID;
	for (int i = fdigits; i < 12; i++)
		frac *= 10;
	if (__builtin_mul_overflow(whole, PICO_PER_USD, &whole) || __builtin_add_overflow(whole, frac, pico))
		return AH_EINVALID;
	if (neg)
		*pico = -*pico;
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
	/* The double is only json-c's in-memory value; the output is `text` verbatim
	 * (normalised above, so all of it is the number). */
	char *end;
	return json_object_new_double_s(strtod(text, &end), text);
}
