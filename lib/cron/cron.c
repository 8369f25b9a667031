/* Parsing cron expressions (cron.h). One field at a time: a list of items
 * separated by ",", each "*", "N" or "N-M", optionally followed by "/STEP";
 * months and weekdays also by their three-letter English names. Every value is
 * checked against its field's range, so a bit set is always a valid one. */
#include "cron/cron.h"
#include "core/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct field {
	const char *name;
	int lo, hi;
	const char *const *names; /* names[i] is value lo + i, or NULL */
} field;

static const char *const MONTHS[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                     "jul", "aug", "sep", "oct", "nov", "dec", NULL};
static const char *const WEEKDAYS[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL};

/* Day of week accepts 7 for Sunday, as every cron does. */
static const field FIELDS[5] = {
	{"minute", 0, 59, NULL},       {"hour", 0, 23, NULL},      {"day of month", 1, 31, NULL},
	{"month", 1, 12, MONTHS},      {"day of week", 0, 7, WEEKDAYS},
};

static const struct {
	const char *name, *expr;
} MACROS[] = {
	{"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
	{"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},     {"@midnight", "0 0 * * *"},
	{"@hourly", "0 * * * *"},
};

static int fail(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (why && cap)
		vsnprintf(why, cap, fmt, ap);
	va_end(ap);
	return AH_EINVALID;
}

/* A number (at most 3 digits: nothing in range is longer) or a name. *p advances. */
static int value(const field *f, const char **p, int *out)
{
	const char *s = *p;
	if (*s >= '0' && *s <= '9') {
		int v = 0, n = 0;
		for (; *s >= '0' && *s <= '9'; s++, n++)
			if (n < 4)
				v = v * 10 + (*s - '0');
		*p = s;
		*out = n < 4 ? v : 9999;
		return 0;
	}
	for (int i = 0; f->names && f->names[i]; i++)
		if (strncasecmp(s, f->names[i], 3) == 0) {
			*p = s + 3;
			*out = f->lo + i;
			return 0;
		}
	return AH_EINVALID;
}

/* One item of a list: s .. end (exclusive). Sets its bits in *bits. */
static int item(const field *f, const char *s, const char *end, uint64_t *bits, char *why, size_t cap)
{
	int lo = f->lo, hi = f->hi, step = 1;
	const char *p = s;
	if (*p == '*') {
		p++;
	} else {
		if (value(f, &p, &lo) != 0)
			return fail(why, cap, "%s: '%.*s' is not a number", f->name, (int)(end - s), s);
		hi = lo;
		if (*p == '-') {
			p++;
			if (value(f, &p, &hi) != 0)
				return fail(why, cap, "%s: '%.*s' is not a range", f->name, (int)(end - s), s);
		}
		if (lo < f->lo || lo > f->hi || hi < f->lo || hi > f->hi)
			return fail(why, cap, "%s: '%.*s' is out of range %d-%d", f->name, (int)(end - s), s,
			            f->lo, f->hi);
		if (hi < lo)
			return fail(why, cap, "%s: range '%.*s' goes backwards", f->name, (int)(end - s), s);
	}
	if (p < end && *p == '/') {
		p++;
		/* "N/S" is N through the end of the range, in steps of S */
		if (s[0] != '*' && hi == lo && memchr(s, '-', (size_t)(end - s)) == NULL)
			hi = f->hi;
		if (value(f, &p, &step) != 0 || step < 1 || step > f->hi)
			return fail(why, cap, "%s: step in '%.*s' must be 1-%d", f->name, (int)(end - s), s, f->hi);
	}
	if (p != end)
		return fail(why, cap, "%s: cannot read '%.*s'", f->name, (int)(end - s), s);
	for (int v = lo; v <= hi; v += step)
		*bits |= 1ull << v;
	return 0;
}

static int parse_field(const field *f, const char *s, size_t len, uint64_t *bits, char *why, size_t cap)
{
	const char *end = s + len;
	*bits = 0;
	while (s < end) {
		const char *comma = memchr(s, ',', (size_t)(end - s));
		const char *stop = comma ? comma : end;
		if (stop == s)
			return fail(why, cap, "%s: empty list item", f->name);
		int rc = item(f, s, stop, bits, why, cap);
		if (rc != 0)
			return rc;
		s = comma ? comma + 1 : end;
		if (comma && s == end)
			return fail(why, cap, "%s: empty list item", f->name);
	}
	return 0;
}

static int days_in_month(int year, int month)
{
	static const int n[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
	return month == 2 && leap ? 29 : n[month - 1];
}

/* With the weekday unrestricted, some month must have one of the days
 * (February counted with 29): "0 0 31 2 *" never runs. */
static int check_dates(const ah_cron *c, char *why, size_t cap)
{
	if (c->days_star || !c->weekdays_star)
		return 0;
	for (int m = 1; m <= 12; m++)
		for (int d = 1; d <= days_in_month(2000, m); d++)
			if ((c->months >> m & 1) && (c->days >> d & 1))
				return 0;
	return fail(why, cap, "day of month: no month in the expression has any of its days, so it never runs");
}

static const char *expand_macro(const char *expr, char *why, size_t cap, int *rc)
{
	*rc = 0;
	if (expr[0] != '@')
		return expr;
	for (size_t i = 0; i < sizeof(MACROS) / sizeof(MACROS[0]); i++)
		if (strcmp(expr, MACROS[i].name) == 0)
			return MACROS[i].expr;
	*rc = fail(why, cap, "unknown macro '%.32s' (known: @hourly @daily @weekly @monthly @yearly)", expr);
	return NULL;
}

/* Splits into whitespace-separated fields; more than 5 is counted, not kept. */
static int split(const char *expr, const char *start[5], size_t len[5])
{
	int n = 0;
	for (const char *p = expr; *p;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		const char *s = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
		if (n < 5) {
			start[n] = s;
			len[n] = (size_t)(p - s);
		}
		n++;
	}
	return n;
}

int ah_cron_parse(ah_cron *out, const char *expr, char *why, size_t cap)
{
	const char *start[5];
	size_t len[5];
	uint64_t bits[5];
	int rc;
	memset(out, 0, sizeof(*out));
	if (strlen(expr) > AH_CRON_EXPR_MAX)
		return fail(why, cap, "expression longer than %d bytes", AH_CRON_EXPR_MAX);
	while (*expr == ' ' || *expr == '\t')
		expr++;
	if (!(expr = expand_macro(expr, why, cap, &rc)))
		return rc;
	int n = split(expr, start, len);
	if (n != 5)
		return fail(why, cap, "expected 5 fields (minute hour day-of-month month day-of-week), got %d", n);
	for (int i = 0; i < 5; i++)
		if ((rc = parse_field(&FIELDS[i], start[i], len[i], &bits[i], why, cap)) != 0)
			return rc;
	out->minutes = bits[0];
	out->hours = (uint32_t)bits[1];
	out->days = (uint32_t)bits[2];
	out->months = (uint16_t)bits[3];
	out->weekdays = (uint8_t)((bits[4] | bits[4] >> 7) & 0x7f); /* 7 is Sunday */
	out->days_star = start[2][0] == '*';
	out->weekdays_star = start[4][0] == '*';
	return check_dates(out, why, cap);
}

/* Day of week of a civil date, 0 = Sunday (Sakamoto's method). */
static int weekday(int y, int m, int d)
{
	static const int t[12] = {0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4};
	if (m < 3)
		y--;
	return (y + y / 4 - y / 100 + y / 400 + t[m - 1] + d) % 7;
}

bool ah_cron_day_matches(const ah_cron *c, int year, int month, int mday);
bool ah_cron_day_matches(const ah_cron *c, int year, int month, int mday)
{
	if (!(c->months >> month & 1) || mday > days_in_month(year, month))
		return false;
	bool dom = c->days >> mday & 1, dow = c->weekdays >> weekday(year, month, mday) & 1;
	return c->days_star || c->weekdays_star ? dom && dow : dom || dow;
}

bool ah_cron_matches(const ah_cron *c, int year, int month, int mday, int hour, int minute)
{
	return ah_cron_day_matches(c, year, month, mday) && (c->hours >> hour & 1) &&
	       (c->minutes >> minute & 1);
}
