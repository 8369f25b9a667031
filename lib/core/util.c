/* See util.h. */
#include "core/util.h"
#include "core/err.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char B62[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

int ah_parse_ll(long long *out, const char *s)
{
	if (!s || !*s)
		return AH_EINVALID;
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return AH_EINVALID;
	*out = v;
	return 0;
}

/* Random bytes are drawn in blocks, one randombytes_buf each (on Linux one
 * getrandom(2): a call's ids took ~50 of them when each character was its
 * own randombytes_uniform). A byte of 248 or more is dropped, so that
 * byte % 62 stays uniform (248 = 4 * 62): no modulo bias. */
#define B62_LIMIT 248

void ah_base62_random(char *out, size_t n)
{
	unsigned char buf[64];
	size_t i = 0;
	while (i < n) {
		/* a few more than needed: about 3% of bytes are dropped */
		size_t want = n - i + (n - i) / 8 + 2;
		want = want < sizeof buf ? want : sizeof buf;
		randombytes_buf(buf, want);
		for (size_t k = 0; k < want && i < n; k++)
			if (buf[k] < B62_LIMIT)
				out[i++] = B62[buf[k] % 62];
	}
	sodium_memzero(buf, sizeof buf);
	out[n] = '\0';
}

char *ah_id_new(ah_arena *a, const char *prefix)
{
	size_t pl = strlen(prefix);
	char *id = ah_alloc(a, pl + 1 + 22 + 1);
	memcpy(id, prefix, pl);
	id[pl] = '_';
	ah_base62_random(id + pl + 1, 22);
	return id;
}

int64_t ah_mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t ah_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec ah_deadline_in_ms(int64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	long long ns = ts.tv_nsec + ms * 1000000LL;
	ts.tv_sec += (time_t)(ns / 1000000000LL);
	ts.tv_nsec = (long)(ns % 1000000000LL);
	return ts;
}

char *ah_now_rfc3339(ah_arena *a)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	return ah_sprintf(a, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
	                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	                  ts.tv_nsec / 1000000);
}

char *ah_db_time_to_rfc3339(ah_arena *a, const char *t)
{
	if (!t || strlen(t) < 19)
		return NULL;
	char ms[4] = "000";
	if (t[19] == '.')
		for (int i = 0; i < 3 && t[20 + i] >= '0' && t[20 + i] <= '9'; i++)
			ms[i] = t[20 + i];
	return ah_sprintf(a, "%.10sT%.8s.%sZ", t, t + 11, ms);
}

int ah_db_time_ms(const char *t, int64_t *ms)
{
	static const char shape[] = "dddd-dd-dd dd:dd:dd";
	struct tm tm = {0};
	int frac = 0;
	for (int i = 0; i < 19; i++)
		if (!t || (shape[i] == 'd' ? !isdigit((unsigned char)t[i]) : t[i] != shape[i]))
			return AH_EINVALID;
	sscanf(t, "%4d-%2d-%2d %2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
	       &tm.tm_min, &tm.tm_sec);
	if (t[19] == '.') {
		int k = 0;
		for (; k < 3 && t[20 + k] >= '0' && t[20 + k] <= '9'; k++)
			frac = frac * 10 + (t[20 + k] - '0');
		if (k == 0)
			return AH_EINVALID;
		for (; k < 3; k++)
			frac *= 10;
	} else if (t[19] != '\0') {
		return AH_EINVALID;
	}
	if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
	    tm.tm_min > 59 || tm.tm_sec > 60)
		return AH_EINVALID;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*ms = (int64_t)timegm(&tm) * 1000 + frac;
	return 0;
}

bool ah_utf8_valid(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;
	while (i < len) {
		unsigned c = s[i];
		size_t n;
		unsigned min;
		if (c < 0x80) { i++; continue; }
		else if ((c & 0xE0) == 0xC0) { n = 1; min = 0x80; c &= 0x1F; }
		else if ((c & 0xF0) == 0xE0) { n = 2; min = 0x800; c &= 0x0F; }
		else if ((c & 0xF8) == 0xF0) { n = 3; min = 0x10000; c &= 0x07; }
		else return false;
		if (n > len - i - 1) /* truncated sequence */
			return false;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return false;
			c = (c << 6) | (s[i + k] & 0x3F);
		}
		if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
			return false;
		i += n + 1;
	}
	return true;
}


size_t ah_utf8_seq(const unsigned char *s, size_t n, size_t *bad)
{
	unsigned c = s[0], lo = 0x80, hi = 0xBF;
	size_t need, k;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		need = 1;
	else if (c >= 0xE0 && c <= 0xEF)
		need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
	else if (c >= 0xF0 && c <= 0xF4)
		need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
	else {
		*bad = 1;
		return 0;
	}
	for (k = 1; k <= need && k < n && s[k] >= lo && s[k] <= hi; k++)
		lo = 0x80, hi = 0xBF; /* only the second byte has a narrower range */
	if (k > need)
		return need + 1;
	*bad = k;
	return 0;
}

const char *ah_utf8_repair(ah_arena *a, const char *str, size_t len, size_t *outlen)
{
	*outlen = len;
	if (ah_utf8_valid(str, len))
		return str;
	const unsigned char *s = (const unsigned char *)str;
	/* Worst case: every byte becomes the 3-byte replacement character. */
	char *out = ah_alloc(a, len * 3 + 1);
	size_t o = 0;
	for (size_t i = 0; i < len;) {
		size_t bad = 0, n = ah_utf8_seq(s + i, len - i, &bad);
		if (n) {
			memcpy(out + o, s + i, n);
			o += n;
			i += n;
		} else {
			memcpy(out + o, "\xEF\xBF\xBD", 3);
			o += 3;
			i += bad;
		}
	}
	*outlen = o;
	return out;
}

void ah_sleep_jittered(unsigned base_us, unsigned jitter_us)
{
	usleep(base_us + randombytes_uniform(jitter_us));
}

char *ah_trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

void ah_chomp(char *s)
{
	size_t n = strlen(s);
	if (n && s[n - 1] == '\n')
		s[--n] = 0;
	if (n && s[n - 1] == '\r')
		s[--n] = 0;
}
