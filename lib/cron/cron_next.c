/* The run times of a cron expression in a time zone (cron.h).
 *
 * The search walks civil time (the zone's wall clock, as plain fields) to the
 * next matching minute, skipping whole months, days and hours that cannot
 * match; then turns that civil time into an instant. A civil time maps to
 * instants u with u + offset(u) = civil: the offsets to try are the zone's a
 * day before and a day after (a zone changes its offset at most once a day).
 * None fits: the time falls in a gap, and the run is at the gap's end (the
 * instant the offset changes, found by bisection). Two fit: the earlier one.
 *
 * Offsets come from glibc's localtime_r with TZ set to the zone: the system's
 * tzdata, its future rules included, without a reader of our own. TZ is
 * process-wide, hence the lock (see cron.h for what it does not cover). */
#include "cron/cron.h"
#include "core/err.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DAY 86400
#define HORIZON_YEARS 9 /* 29 February returns within 8 years (2096 → 2104) */

bool ah_cron_day_matches(const ah_cron *c, int year, int month, int mday);

static pthread_mutex_t tz_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *zone_dir(void)
{
	const char *d = getenv("TZDIR");
	return d && *d ? d : "/usr/share/zoneinfo";
}

static bool zone_name_ok(const char *z)
{
	size_t n = strlen(z);
	if (n < 1 || n > AH_CRON_ZONE_MAX || z[0] == '/' || z[0] == '.' || strstr(z, ".."))
		return false;
	for (const char *p = z; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		      strchr("_+-./", *p)))
			return false;
	return true;
}

bool ah_cron_zone_valid(const char *zone)
{
	char path[4096], magic[4];
	if (!zone_name_ok(zone))
		return false;
	snprintf(path, sizeof(path), "%s/%s", zone_dir(), zone);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) /* a link (Debian's backward names) is followed once, on purpose */
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool ok = read(fd, magic, 4) == 4 && memcmp(magic, "TZif", 4) == 0;
	close(fd);
	return ok;
}

/* ---- civil time as plain fields ---- */

typedef struct civil {
	int y, mo, d, h, mi; /* month 1–12 */
} civil;

/* The civil time read as if it were UTC: seconds since the epoch (timegm
 * normalises overflowing fields, so the walk below may add to any field). */
static int64_t civil_secs(civil c)
{
	struct tm tm = {.tm_year = c.y - 1900, .tm_mon = c.mo - 1, .tm_mday = c.d,
	                .tm_hour = c.h, .tm_min = c.mi};
	return (int64_t)timegm(&tm);
}

static civil civil_of(int64_t secs)
{
	time_t t = (time_t)secs;
	struct tm tm;
	gmtime_r(&t, &tm);
	return (civil){tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min};
}

/* The first civil minute at or after c that the expression matches; false
 * past the horizon. */
static bool civil_next(const ah_cron *cr, civil c, int end_year, civil *out)
{
	while (c.y <= end_year) {
		if (!(cr->months >> c.mo & 1)) {
			c = civil_of(civil_secs((civil){c.y, c.mo + 1, 1, 0, 0}));
		} else if (!ah_cron_day_matches(cr, c.y, c.mo, c.d)) {
			c = civil_of(civil_secs((civil){c.y, c.mo, c.d + 1, 0, 0}));
		} else if (!(cr->hours >> c.h & 1)) {
			c = civil_of(civil_secs((civil){c.y, c.mo, c.d, c.h + 1, 0}));
		} else if (!(cr->minutes >> c.mi & 1)) {
			c = civil_of(civil_secs((civil){c.y, c.mo, c.d, c.h, c.mi + 1}));
		} else {
			*out = c;
			return true;
		}
	}
	return false;
}

/* ---- civil time to instant, in the zone TZ holds ---- */

static int64_t offset_at(int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;
	localtime_r(&tt, &tm);
	return (int64_t)tm.tm_gmtoff;
}

/* The first instant in (lo, hi] whose offset is that of hi. */
static int64_t change_at(int64_t lo, int64_t hi)
{
	int64_t want = offset_at(hi);
	while (hi - lo > 1) {
		int64_t mid = lo + (hi - lo) / 2;
		if (offset_at(mid) == want)
			hi = mid;
		else
			lo = mid;
	}
	return hi;
}

static int64_t instant_of(int64_t cs)
{
	int64_t before = offset_at(cs - DAY), after = offset_at(cs + DAY);
	int64_t u1 = cs - before, u2 = cs - after;
	bool ok1 = offset_at(u1) == before, ok2 = offset_at(u2) == after;
	if (ok1 && ok2)
		return u1 < u2 ? u1 : u2; /* occurs twice: the first time */
	if (ok1 || ok2)
		return ok1 ? u1 : u2;
	/* In a gap: the wall clock jumps over cs at the change. */
	return change_at(cs - 2 * DAY, cs + 2 * DAY);
}

static int64_t local_secs(int64_t t)
{
	return t + offset_at(t);
}

static int next_in_zone(int64_t *out, const ah_cron *c, int64_t after)
{
	civil start = civil_of(local_secs(after) - local_secs(after) % 60 + 60);
	int end_year = start.y + HORIZON_YEARS;
	civil m;
	while (civil_next(c, start, end_year, &m)) {
		int64_t u = instant_of(civil_secs(m));
		/* A civil time in a fall-back hour already run (its first time is
		 * before `after`), or a gap's end at or before it: the next one. */
		if (u > after) {
			*out = u;
			return 0;
		}
		start = civil_of(civil_secs(m) + 60);
	}
	return AH_ENOTFOUND;
}

int ah_cron_next(int64_t *out, const ah_cron *c, const char *zone, int64_t after)
{
	char tz[AH_CRON_ZONE_MAX + 2];
	if (!ah_cron_zone_valid(zone))
		return AH_EINVALID;
	snprintf(tz, sizeof(tz), ":%s", zone);
	pthread_mutex_lock(&tz_lock);
	const char *was = getenv("TZ");
	char *saved = was ? strdup(was) : NULL;
	setenv("TZ", tz, 1);
	tzset();
	int rc = next_in_zone(out, c, after);
	if (saved)
		setenv("TZ", saved, 1);
	else
		unsetenv("TZ");
	tzset();
	free(saved);
	pthread_mutex_unlock(&tz_lock);
	return rc;
}
