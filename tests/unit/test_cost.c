/* Unit test of the invocation money and text helpers (handlers/invocations.h),
 * printed as TAP: price parsing, exact cost in pico-dollars, the decimal text
 * that goes out as a JSON number, and the UTF-8 repair of agent output. One
 * table row per case; the row says what is checked. */
#include "invocations.h"
#include "core/util.h"

#include <stdio.h>
#include <string.h>

#include "tap.h"

static const struct {
	const char *text;
	int rc;
	long long micro;
} prices[] = {
	{"3.00", 0, 3000000},
	{"15", 0, 15000000},
	{"0.25", 0, 250000},
	{".5", 0, 500000},
	{"0.000001", 0, 1},
	{"999999.999999", 0, 999999999999LL},
	{"1000000", AH_EINVALID, 0},     /* seven digits of dollars */
	{"0.0000001", AH_EINVALID, 0},   /* finer than a micro-dollar */
	{"-1", AH_EINVALID, 0},
	{"1e3", AH_EINVALID, 0},
	{"", AH_EINVALID, 0},
	{".", AH_EINVALID, 0},
	{"3.00 ", AH_EINVALID, 0},
};

static const struct {
	long long in_tok, out_tok, pin, pout;
	const char *text;
} costs[] = {
	{16, 16, 3000000, 15000000, "0.000288"},
	{0, 0, 3000000, 15000000, "0.0"},
	{1, 0, 3000000, 15000000, "0.000003"},
	{1000000, 1000000, 3000000, 15000000, "18.0"},
	{7, 3, 250000, 1250000, "0.0000055"},
	{1, 1, 1, 1, "0.000000000002"},
	{123456789, 987654321, 3000000, 15000000, "15185.185182"},
};

static const struct {
	const char *db, *want;
} decimals[] = {
	{"0.000288000000", "0.000288"},
	{"12.000000000000", "12.0"},
	{"0", "0.0"},
	{NULL, "0.0"},
	{"5", "5.0"},
	{"0.100000000000", "0.1"},
};

/* A string literal and its length, NUL bytes included. */
#define S(x) x, sizeof(x) - 1

static const struct {
	const char *in;
	size_t len;
	const char *want;
	size_t wlen;
} repairs[] = {
	{S("plain ascii"), S("plain ascii")},
	{S("caf\xc3\xa9"), S("caf\xc3\xa9")},
	{S("a\xff" "b"), S("a\xef\xbf\xbd" "b")},
	{S("a\x00" "b"), S("a\x00" "b")},
	{S("\xe2\x82"), S("\xef\xbf\xbd")},                  /* truncated: one replacement */
	{S("\xe2\x82" "c"), S("\xef\xbf\xbd" "c")},
	{S("\xed\xa0\x80"), S("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd")}, /* surrogate: 3 */
	{S("\xc0\xaf"), S("\xef\xbf\xbd\xef\xbf\xbd")},      /* overlong */
	{S("\xf0\x9f\x98\x80"), S("\xf0\x9f\x98\x80")},      /* emoji kept */
	{S("\xf4\x90\x80\x80"), S("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd")},
	{S("\x80\x80"), S("\xef\xbf\xbd\xef\xbf\xbd")},
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Money text back to pico-dollars (budgets: spend rows, costs). */
static const struct { const char *s; int rc; long long pico; } parses[] = {
	{"0.000117", 0, 117000000LL}, {"2", 0, 2000000000000LL}, {"-1.5", 0, -1500000000000LL},
	{"1.500000000000", 0, 1500000000000LL}, {".5", 0, 500000000000LL},
	{"0.0000000000001", AH_EINVALID, 0}, {"1e3", AH_EINVALID, 0}, {"", AH_EINVALID, 0},
	{"-", AH_EINVALID, 0}, {"9999999999", AH_EINVALID, 0}, {"1.2.3", AH_EINVALID, 0},
};

int main(void)
{
	ah_arena *a = ah_arena_new();
	printf("1..%zu\n", N(prices) + N(costs) + N(decimals) + N(repairs) + N(parses) + 2);
	for (size_t i = 0; i < N(prices); i++) {
		long long v = -1;
		int rc = ah_price_parse(&v, prices[i].text);
		ok(rc == prices[i].rc && (rc != 0 || v == prices[i].micro), "%s",
		   prices[i].rc ? ah_sprintf(a, "price \"%s\" is refused", prices[i].text)
		                : ah_sprintf(a, "price \"%s\" is %lld micro-dollars", prices[i].text,
		                             prices[i].micro));
	}
	for (size_t i = 0; i < N(costs); i++) {
		long long pico = -1;
		const char *want = costs[i].text;
		int rc = ah_cost_pico(&pico, costs[i].in_tok, costs[i].out_tok, costs[i].pin, costs[i].pout);
		const char *got = rc == 0 ? ah_money_text(a, pico) : "error";
		ok(strcmp(got, want) == 0, "%s", ah_sprintf(a, "%lld in + %lld out tokens cost %s (got %s)",
		                                      costs[i].in_tok, costs[i].out_tok, want, got));
	}
	long long pico;
	ok(ah_cost_pico(&pico, 1LL << 62, 0, 1000000, 0) == AH_EINVALID, "an overflowing cost is refused");
	ok(strcmp(ah_money_text(a, -1500000000000LL), "-1.5") == 0, "negative amounts keep their sign");
	for (size_t i = 0; i < N(decimals); i++) {
		const char *got = ah_money_normalise(a, decimals[i].db);
		ok(strcmp(got, decimals[i].want) == 0, "%s",
		   ah_sprintf(a, "DECIMAL %s reads as %s (got %s)", decimals[i].db ? decimals[i].db : "NULL",
		              decimals[i].want, got));
	}
	for (size_t i = 0; i < N(repairs); i++) {
		size_t n;
		const char *got = ah_utf8_repair(a, repairs[i].in, repairs[i].len, &n);
		ok(n == repairs[i].wlen && memcmp(got, repairs[i].want, n) == 0,
		   "UTF-8 repair of row %zu", i);
	}
	for (size_t i = 0; i < N(parses); i++) {
		long long v = -7;
		int rc = ah_money_parse(&v, parses[i].s);
		ok(rc == parses[i].rc && (rc != 0 || v == parses[i].pico), "%s",
		   ah_sprintf(a, "money \"%s\" parses as %lld (got rc %d, %lld)", parses[i].s, parses[i].pico, rc, v));
	}
	ah_arena_destroy(a);
	return nfail == 0 ? 0 : 1;
}
