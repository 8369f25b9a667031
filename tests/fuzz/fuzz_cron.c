/* Fuzz target: cron expressions (lib/cron). Input: one byte choosing a time
 * zone and a starting instant (some next to a daylight-saving change), then
 * the expression. Properties: an accepted expression sets only bits inside
 * each field's range; its run times come strictly later each time, on whole
 * minutes; each one's civil time in the zone matches the expression, unless
 * it is the end of a gap (the zone's offset changes right there: a time the
 * clock skipped runs then). */
#include "cron/cron.h"
#include "core/err.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const ZONES[] = {"UTC", "America/New_York", "Europe/Berlin",
                                    "Australia/Lord_Howe", "Asia/Kathmandu", "Pacific/Apia"};
static const int64_t STARTS[] = {
	1795132800, /* 2026-11-20T00:00Z */
	1772928000, /* 2026-03-08T00:00Z, the US spring-forward day */
	1793491200, /* 2026-11-01T00:00Z, the US fall-back day */
	1774742400, /* 2026-03-29T00:00Z, the EU spring-forward day */
	4102444800, /* 2100-01-01T00:00Z, no 29 February */
};
#define N(a) (sizeof(a) / sizeof((a)[0]))

static void check_bits(const ah_cron *c)
{
	if (c->minutes >> 60 || c->hours >> 24 || (c->days & 1) || (c->months & 1) || c->months >> 13 ||
	    c->weekdays >> 7 || !c->minutes || !c->hours || !c->days || !c->months || !c->weekdays)
		__builtin_trap();
}

static long offset_at(int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;
	localtime_r(&tt, &tm);
	return tm.tm_gmtoff;
}

/* The run at t matches in zone (TZ set by the caller), or ends a gap. */
static void check_run(const ah_cron *c, int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;
	localtime_r(&tt, &tm);
	if (ah_cron_matches(c, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min))
		return;
	if (offset_at(t - 1) < offset_at(t))
		return; /* the end of a gap */
	__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > AH_CRON_EXPR_MAX + 2)
		return 0;
	const char *zone = ZONES[data[0] % N(ZONES)];
	int64_t t = STARTS[(data[0] / N(ZONES)) % N(STARTS)];
	char *expr = malloc(size);
	memcpy(expr, data + 1, size - 1);
	expr[size - 1] = '\0';
	ah_cron c;
	char why[256];
	if (ah_cron_parse(&c, expr, why, sizeof(why)) == 0) {
		check_bits(&c);
		for (int i = 0; i < 3; i++) {
			int64_t next;
			int rc = ah_cron_next(&next, &c, zone, t);
			if (rc == AH_ENOTFOUND)
				break;
			if (rc != 0 || next <= t || next % 60 != 0)
				__builtin_trap();
			setenv("TZ", zone, 1);
			tzset();
			check_run(&c, next);
			unsetenv("TZ");
			tzset();
			t = next;
		}
	} else if (!why[0]) {
		__builtin_trap(); /* a refusal always says why */
	}
	free(expr);
	return 0;
}
