/* Cron expressions for schedules (issue 32): five fields (minute, hour,
 * day of month, month, day of week) with lists, ranges, steps and English
 * month and day names, or one of the @hourly … @yearly macros; and the run
 * times they give in an IANA time zone, read from the system's tzdata.
 *
 * Debian has no C cron library, so this is a small parser of our own, fuzzed
 * (tests/fuzz/fuzz_cron.c) like the other parsers.
 *
 * Semantics (Vixie cron's): when both day fields are restricted, a day
 * matches if either does; when one of them starts with "*", both must match
 * (the "*" one always does). Times are civil times of the zone. A civil time
 * that does not exist (a spring-forward gap) runs once, at the end of the gap;
 * one that occurs twice (fall-back) runs once, at its first occurrence. */
#ifndef AH_CRON_CRON_H
#define AH_CRON_CRON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AH_CRON_EXPR_MAX 256 /* bytes of an expression */
#define AH_CRON_ZONE_MAX 64  /* bytes of a zone name */

typedef struct ah_cron {
	uint64_t minutes;  /* bit m: minute m, 0–59 */
	uint32_t hours;    /* bit h: hour h, 0–23 */
	uint32_t days;     /* bit d: day of month d, 1–31 */
	uint16_t months;   /* bit m: month m, 1–12 */
	uint8_t weekdays;  /* bit w: weekday w, 0 = Sunday … 6 (7 is read as Sunday) */
	bool days_star, weekdays_star; /* the field began with "*" */
} ah_cron;

/* Parses expr. 0, or AH_EINVALID with a sentence for the user in why
 * (six fields, a value out of range, a date that never occurs: "0 0 31 2 *"). */
int ah_cron_parse(ah_cron *out, const char *expr, char *why, size_t whycap);

/* Whether zone names a time zone of the system's tzdata ($TZDIR or
 * /usr/share/zoneinfo): a relative name of letters, digits and "_+-./"
 * without "..", whose file is a TZif file. */
bool ah_cron_zone_valid(const char *zone);

/* The first run time of c in zone strictly after `after` (Unix seconds),
 * whole minutes. 0; AH_ENOTFOUND when none within nine years (a date that
 * never occurs); AH_EINVALID for a zone that is not valid.
 *
 * The zone is applied with TZ and tzset() under a lock of this module;
 * another thread of the process calling localtime() meanwhile would see the
 * zone (the API's processes, which use this, are single-threaded). */
int ah_cron_next(int64_t *out, const ah_cron *c, const char *zone, int64_t after);

/* Whether c matches the civil time given as fields (for tests and the fuzz
 * harness's check). */
bool ah_cron_matches(const ah_cron *c, int year, int month, int mday, int hour, int minute);

#endif
