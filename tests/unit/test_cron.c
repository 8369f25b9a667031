/* Unit test of lib/cron: what parses and what is refused (with the field
 * named), and run times in zones with daylight saving: a time in the
 * spring-forward gap runs once at the gap's end, a time in the fall-back hour
 * once, the first time. Expected instants were worked out with Python's
 * zoneinfo over the same tzdata. Table-driven, printed as TAP. */
#include "cron/cron.h"
#include "core/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tap.h"

static const struct {
	const char *expr;
	int rc;
	const char *why; /* a part of the message, for a refusal */
} parse_cases[] = {
	{"* * * * *", 0, NULL},
	{"*/15 9-17 * * mon-fri", 0, NULL},
	{"0 0 1,15 jan,JUL *", 0, NULL},
	{"5/20 * * * *", 0, NULL},
	{"0 0 * * 7", 0, NULL},
	{"  0\t0 29 2 *  ", 0, NULL},
	{"@daily", 0, NULL},
	{"0 0 31 2 1", 0, NULL}, /* restricted weekday: any Monday in February */
	{"* * * * * *", AH_EINVALID, "got 6"},
	{"* * * *", AH_EINVALID, "got 4"},
	{"", AH_EINVALID, "got 0"},
	{"0 0 31 2 *", AH_EINVALID, "day of month"},
	{"0 0 30 2 *", AH_EINVALID, "never runs"},
	{"0 0 31 4,6,9,11 *", AH_EINVALID, "never runs"},
	{"60 * * * *", AH_EINVALID, "minute"},
	{"* 24 * * *", AH_EINVALID, "hour"},
	{"* * 0 * *", AH_EINVALID, "day of month"},
	{"* * * 13 *", AH_EINVALID, "month"},
	{"* * * * 8", AH_EINVALID, "day of week"},
	{"5-1 * * * *", AH_EINVALID, "backwards"},
	{"*/0 * * * *", AH_EINVALID, "step"},
	{"1,,2 * * * *", AH_EINVALID, "empty"},
	{"1, * * * *", AH_EINVALID, "empty"},
	{"a * * * *", AH_EINVALID, "minute"},
	{"99999999999 * * * *", AH_EINVALID, "out of range"},
	{"*5 * * * *", AH_EINVALID, "minute"},
	{"@reboot", AH_EINVALID, "macro"},
};

static void test_parse(void)
{
	for (size_t i = 0; i < sizeof(parse_cases) / sizeof(parse_cases[0]); i++) {
		ah_cron c;
		char why[256] = "";
		int rc = ah_cron_parse(&c, parse_cases[i].expr, why, sizeof(why));
		ok(rc == parse_cases[i].rc && (!parse_cases[i].why || strstr(why, parse_cases[i].why)),
		   "parse '%s' -> %d (%s)", parse_cases[i].expr, rc, why);
	}
}

static const struct {
	const char *zone;
	bool valid;
} zone_cases[] = {
	{"UTC", true}, {"America/New_York", true}, {"Etc/GMT+5", true}, {"Asia/Kathmandu", true},
	{"Mars/Olympus", false}, {"", false}, {"../etc/passwd", false}, {"/etc/passwd", false},
	{"America/../UTC", false}, {"America", false}, {"America/New York", false},
};

static void test_zones(void)
{
	for (size_t i = 0; i < sizeof(zone_cases) / sizeof(zone_cases[0]); i++)
		ok(ah_cron_zone_valid(zone_cases[i].zone) == zone_cases[i].valid, "zone '%s' valid: %d",
		   zone_cases[i].zone, zone_cases[i].valid);
}

/* "YYYY-MM-DDTHH:MMZ" both ways */
static int64_t at(const char *s)
{
	struct tm tm = {0};
	sscanf(s, "%d-%d-%dT%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm);
}

static void fmt(char out[32], int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;
	gmtime_r(&tt, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%MZ", &tm);
}

static const struct {
	const char *what, *expr, *zone, *after, *want[2];
} next_cases[] = {
	{"noon UTC", "0 12 * * *", "UTC", "2026-11-28T02:00", {"2026-11-28T12:00Z", "2026-11-29T12:00Z"}},
	{"every 15 minutes", "*/15 * * * *", "UTC", "2026-11-28T02:07", {"2026-11-28T02:15Z", "2026-11-28T02:30Z"}},
	{"exactly on a tick: the next", "0 * * * *", "UTC", "2026-11-28T02:00", {"2026-11-28T03:00Z", "2026-11-28T04:00Z"}},
	{"weekdays in New York", "0 9 * * 1-5", "America/New_York", "2026-11-28T02:00",
	 {"2026-11-30T14:00Z", "2026-12-01T14:00Z"}},
	{"day 13 or a Friday", "0 0 13 * 5", "UTC", "2026-11-28T02:00", {"2026-12-04T00:00Z", "2026-12-11T00:00Z"}},
	{"gap: 02:30 runs at 03:00 EDT", "30 2 * * *", "America/New_York", "2026-03-08T05:00",
	 {"2026-03-08T07:00Z", "2026-03-09T06:30Z"}},
	{"gap: four ticks run once", "*/15 2 * * *", "America/New_York", "2026-03-08T05:00",
	 {"2026-03-08T07:00Z", "2026-03-09T06:00Z"}},
	{"overlap: 01:30 runs once, EDT", "30 1 * * *", "America/New_York", "2026-11-01T04:00",
	 {"2026-11-01T05:30Z", "2026-11-02T06:30Z"}},
	{"overlap: hourly skips the repeat", "0 * * * *", "America/New_York", "2026-11-01T04:30",
	 {"2026-11-01T05:00Z", "2026-11-01T07:00Z"}},
	{"half-hour gap (Lord Howe)", "15 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00",
	 {"2026-10-03T15:30Z", "2026-10-04T15:15Z"}},
	{"+05:45 (Kathmandu)", "0 0 * * *", "Asia/Kathmandu", "2026-11-28T00:00",
	 {"2026-11-28T18:15Z", "2026-11-29T18:15Z"}},
	{"29 February", "0 0 29 2 *", "UTC", "2026-01-01T00:00", {"2028-02-29T00:00Z", "2032-02-29T00:00Z"}},
};

static void test_next(void)
{
	for (size_t i = 0; i < sizeof(next_cases) / sizeof(next_cases[0]); i++) {
		ah_cron c;
		char got[2][32] = {"-", "-"};
		int64_t t = at(next_cases[i].after);
		int rc = ah_cron_parse(&c, next_cases[i].expr, NULL, 0);
		for (int k = 0; k < 2 && rc == 0; k++)
			if ((rc = ah_cron_next(&t, &c, next_cases[i].zone, t)) == 0)
				fmt(got[k], t);
		ok(rc == 0 && strcmp(got[0], next_cases[i].want[0]) == 0 &&
		   strcmp(got[1], next_cases[i].want[1]) == 0, "%s: %s %s", next_cases[i].what, got[0], got[1]);
	}
	ah_cron c;
	int64_t t = 0;
	ah_cron_parse(&c, "* * * * *", NULL, 0);
	ok(ah_cron_next(&t, &c, "Mars/Olympus", 0) == AH_EINVALID, "an unknown zone is refused");
	/* TZ is put back: the process's own zone is not changed by a lookup */
	ok(getenv("TZ") == NULL, "TZ left unset");
}

int main(void)
{
	test_parse();
	test_zones();
	test_next();
	return tap_done();
}
