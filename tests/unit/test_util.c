/* Unit test of lib/core: checked number parsing, UTF-8 validation, time
 * formatting, ids, the request arena, configuration lookup and the escaping
 * of untrusted text for log lines. Table-driven,
 * printed as TAP. */
#include "core/arena.h"
#include "core/config.h"
#include "core/err.h"
#include "core/log.h"
#include "core/util.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

/* ---- ah_parse_ll ---- */

static const struct {
	const char *in;
	int rc;
	long long want;
} parse_cases[] = {
	{"0", 0, 0},
	{"42", 0, 42},
	{"-7", 0, -7},
	{"9223372036854775807", 0, LLONG_MAX},
	{"-9223372036854775808", 0, LLONG_MIN},
	{"9223372036854775808", AH_EINVALID, 0},   /* overflow */
	{"-9223372036854775809", AH_EINVALID, 0},  /* underflow */
	{"", AH_EINVALID, 0},
	{"abc", AH_EINVALID, 0},
	{"12abc", AH_EINVALID, 0},
	{"1.5", AH_EINVALID, 0},
	{"1e3", AH_EINVALID, 0},
	{"5 ", AH_EINVALID, 0},
	{"0x10", AH_EINVALID, 0},
	{"-", AH_EINVALID, 0},
};

static void test_parse_ll(void)
{
	for (size_t i = 0; i < sizeof(parse_cases) / sizeof(parse_cases[0]); i++) {
		long long v = 12345;
		int rc = ah_parse_ll(&v, parse_cases[i].in);
		if (parse_cases[i].rc == 0)
			ok(rc == 0 && v == parse_cases[i].want, "parse_ll(\"%s\") = %lld", parse_cases[i].in,
			   parse_cases[i].want);
		else
			ok(rc == parse_cases[i].rc && v == 12345, "parse_ll(\"%s\") is invalid and leaves out alone",
			   parse_cases[i].in);
	}
	long long v = 1;
	ok(ah_parse_ll(&v, NULL) == AH_EINVALID, "parse_ll(NULL) is invalid");
}

/* ---- ah_utf8_valid ---- */

static const struct {
	const char *desc;
	const char *s;
	size_t len;
	int valid;
} utf8_cases[] = {
	{"empty", "", 0, 1},
	{"ASCII", "hello", 5, 1},
	{"NUL byte is valid UTF-8", "a\0b", 3, 1},
	{"two-byte e-acute", "\xc3\xa9", 2, 1},
	{"three-byte euro", "\xe2\x82\xac", 3, 1},
	{"four-byte emoji", "\xf0\x9f\x98\x80", 4, 1},
	{"U+10FFFF", "\xf4\x8f\xbf\xbf", 4, 1},
	{"U+D7FF below surrogates", "\xed\x9f\xbf", 3, 1},
	{"U+E000 above surrogates", "\xee\x80\x80", 3, 1},
	{"lone continuation byte", "\x80", 1, 0},
	{"0xFF", "\xff", 1, 0},
	{"0xFE", "\xfe", 1, 0},
	{"overlong slash (2 bytes)", "\xc0\xaf", 2, 0},
	{"overlong NUL (2 bytes)", "\xc0\x80", 2, 0},
	{"overlong slash (3 bytes)", "\xe0\x80\xaf", 3, 0},
	{"overlong (4 bytes)", "\xf0\x80\x80\xaf", 4, 0},
	{"high surrogate U+D800", "\xed\xa0\x80", 3, 0},
	{"low surrogate U+DFFF", "\xed\xbf\xbf", 3, 0},
	{"past U+10FFFF", "\xf4\x90\x80\x80", 4, 0},
	{"five-byte form", "\xf8\x88\x80\x80\x80", 5, 0},
	{"truncated two-byte", "\xc3", 1, 0},
	{"truncated three-byte", "\xe2\x82", 2, 0},
	{"truncated four-byte", "\xf0\x9f\x98", 3, 0},
	{"bad continuation", "\xc3\x28", 2, 0},
	{"valid then invalid", "ok\xc3\xa9\xff", 5, 0},
};

static void test_utf8(void)
{
	for (size_t i = 0; i < sizeof(utf8_cases) / sizeof(utf8_cases[0]); i++)
		ok(ah_utf8_valid(utf8_cases[i].s, utf8_cases[i].len) == (utf8_cases[i].valid != 0),
		   "utf8_valid: %s is %s", utf8_cases[i].desc, utf8_cases[i].valid ? "valid" : "invalid");
	/* the length bounds the check: a valid prefix of an invalid buffer */
	ok(ah_utf8_valid("ab\xff", 2), "utf8_valid stops at len");
}

/* ---- ah_db_time_to_rfc3339 ---- */

static const struct {
	const char *in, *want;
} time_cases[] = {
	{"2026-11-21 23:59:59.123", "2026-11-21T23:59:59.123Z"},
	{"2026-11-21 23:59:59", "2026-11-21T23:59:59.000Z"},
	{"2026-01-02 03:04:05.1", "2026-01-02T03:04:05.100Z"},
	{"2026-01-02 03:04:05.123456", "2026-01-02T03:04:05.123Z"},
	{"1970-01-01 00:00:00.000", "1970-01-01T00:00:00.000Z"},
	{"2026-01-02", NULL},
	{"", NULL},
	{NULL, NULL},
};

/* ---- ah_db_time_ms: a heartbeat's time, for its age by this host's clock ---- */

static const struct {
	const char *in;
	int rc;
	int64_t want;
} ms_cases[] = {
	{"1970-01-01 00:00:00.000", 0, 0},
	{"1970-01-01 00:00:01", 0, 1000},
	{"2026-11-28 12:00:00.5", 0, 1795867200500},
	{"2026-11-28 12:00:00.123", 0, 1795867200123},
	{"2024-02-29 23:59:59.999", 0, 1709251199999},
	{"2026-11-28 12:00:00.", AH_EINVALID, 0},
	{"2026-11-28 12:00:00Z", AH_EINVALID, 0},
	{"2026-13-28 12:00:00", AH_EINVALID, 0},
	{"2026-11-28", AH_EINVALID, 0},
	{"2026-11-28 12:00:-1", AH_EINVALID, 0},
	{"1795867200123", AH_EINVALID, 0},
	{"", AH_EINVALID, 0},
	{NULL, AH_EINVALID, 0},
};

static void test_db_time_ms(void)
{
	for (size_t i = 0; i < sizeof(ms_cases) / sizeof(ms_cases[0]); i++) {
		int64_t got = -1;
		int rc = ah_db_time_ms(ms_cases[i].in, &got);
		ok(rc == ms_cases[i].rc && (rc != 0 || got == ms_cases[i].want), "db_time_ms(\"%s\") -> %d %lld",
		   ms_cases[i].in ? ms_cases[i].in : "NULL", rc, (long long)got);
	}
}

static void test_time(ah_arena *a)
{
	for (size_t i = 0; i < sizeof(time_cases) / sizeof(time_cases[0]); i++) {
		const char *got = ah_db_time_to_rfc3339(a, time_cases[i].in);
		const char *want = time_cases[i].want;
		ok(want ? (got && strcmp(got, want) == 0) : got == NULL, "db_time(\"%s\") -> %s",
		   time_cases[i].in ? time_cases[i].in : "NULL", want ? want : "NULL");
	}
	const char *now = ah_now_rfc3339(a);
	ok(strlen(now) == 24 && now[10] == 'T' && now[19] == '.' && now[23] == 'Z',
	   "now_rfc3339 has the shape YYYY-MM-DDTHH:MM:SS.mmmZ (%s)", now);
	/* A deadline whose nanoseconds reach a second makes pthread_cond_timedwait
	 * fail with EINVAL at once instead of waiting: every sum must carry. */
	const int64_t spans[] = { 0, 1, 999, 1000, 1500, 250, 60000 };
	for (size_t i = 0; i < sizeof(spans) / sizeof(spans[0]); i++) {
		int64_t before = ah_now_ms();
		struct timespec d = ah_deadline_in_ms(spans[i]);
		int64_t at = (int64_t)d.tv_sec * 1000 + d.tv_nsec / 1000000;
		ok(d.tv_nsec >= 0 && d.tv_nsec < 1000000000 && at >= before + spans[i] &&
		   at <= ah_now_ms() + spans[i],
		   "deadline_in_ms(%lld) is that far from now, nanoseconds carried", (long long)spans[i]);
	}
}

/* ---- ids ---- */

static int is_b62(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
			return 0;
	return 1;
}

static void test_ids(ah_arena *a)
{
	static const char *const prefixes[] = {"agt", "key", "usr", "file", "inv"};
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		const char *id = ah_id_new(a, prefixes[i]);
		size_t pl = strlen(prefixes[i]);
		ok(strncmp(id, prefixes[i], pl) == 0 && id[pl] == '_' && strlen(id) == pl + 23 &&
		   is_b62(id + pl + 1, 22), "id_new(\"%s\") = prefix_ + 22 base62 (%s)", prefixes[i], id);
	}
	const char *x = ah_id_new(a, "agt"), *y = ah_id_new(a, "agt");
	ok(strcmp(x, y) != 0, "two ids differ");
	/* every base62 character shows up: not a narrower alphabet */
	char buf[4001];
	ah_base62_random(buf, 4000);
	int seen[128] = {0}, distinct = 0;
	for (size_t i = 0; i < 4000; i++)
		if (!seen[(unsigned char)buf[i]]++)
			distinct++;
	ok(buf[4000] == '\0' && is_b62(buf, 4000) && distinct == 62,
	   "base62_random uses all 62 characters (%d seen) and terminates", distinct);
}

/* The system's random source, counted: each draw is a getrandom(2) on Linux,
 * and an API call makes several ids. */
static int draws;

static const char *counted_name(void)
{
	return "counted";
}

static uint32_t counted_random(void)
{
	draws++;
	return randombytes_sysrandom_implementation.random();
}

static void counted_buf(void *const buf, const size_t size)
{
	draws++;
	randombytes_sysrandom_implementation.buf(buf, size);
}

static randombytes_implementation counted = {
	.implementation_name = counted_name, .random = counted_random, .buf = counted_buf,
};

static void test_id_draws(ah_arena *a)
{
	draws = 0;
	ah_id_new(a, "inv");
	ok(draws <= 2, "an id takes at most two draws from the random source (%d)", draws);
	/* Uniform: a modulo bias (byte % 62 over all 256 values) would give the
	 * first 8 characters 5/4 of the others' share; each is expected 2000 times
	 * here, give or take 45. */
	static char buf[62 * 2000 + 1];
	int count[128] = {0}, lo = INT_MAX, hi = 0;
	ah_base62_random(buf, sizeof buf - 1);
	for (size_t i = 0; i < sizeof buf - 1; i++)
		count[(unsigned char)buf[i]]++;
	for (const char *c = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"; *c; c++) {
		lo = count[(unsigned char)*c] < lo ? count[(unsigned char)*c] : lo;
		hi = count[(unsigned char)*c] > hi ? count[(unsigned char)*c] : hi;
	}
	ok(lo > 1700 && hi < 2300, "base62 characters are uniform (each 1700-2300 of 124000: %d-%d)",
	   lo, hi);
}

/* ---- arena ---- */

static char order[16];
static size_t norder;

static void hook(void *p)
{
	order[norder++] = *(char *)p;
}

static void test_arena(void)
{
	ah_arena *a = ah_arena_new();
	char *p = ah_alloc(a, 100);
	int zero = 1;
	for (int i = 0; i < 100; i++)
		zero &= p[i] == 0;
	ok(zero, "alloc returns zeroed memory");
	ok(((uintptr_t)ah_alloc(a, 3) % sizeof(max_align_t)) == 0 &&
	   ((uintptr_t)ah_alloc(a, 1) % sizeof(max_align_t)) == 0, "allocations are max-aligned");
	char *big = ah_alloc(a, 1 << 20);
	big[(1 << 20) - 1] = 'x';
	ok(big[0] == 0, "a 1 MiB allocation (larger than a block) works");
	for (int i = 0; i < 2000; i++)
		ah_alloc(a, 100); /* several blocks */
	ok(strcmp(ah_strdup(a, "hello"), "hello") == 0, "strdup");
	ok(ah_strdup(a, NULL) == NULL, "strdup(NULL) is NULL");
	ok(strcmp(ah_strndup(a, "hello", 3), "hel") == 0, "strndup cuts");
	ok(strcmp(ah_sprintf(a, "%s-%d-%zu", "x", -4, (size_t)7), "x--4-7") == 0, "sprintf formats");
	char *longs = ah_sprintf(a, "%0*d", 100000, 1);
	ok(strlen(longs) == 100000 && longs[99999] == '1', "sprintf of 100000 characters");
	static char ca = 'a', cb = 'b', cc = 'c';
	norder = 0;
	ah_arena_on_cleanup(a, hook, &ca);
	ah_arena_on_cleanup(a, hook, &cb);
	ah_arena_on_cleanup(a, hook, &cc);
	ah_arena_reset(a);
	ok(norder == 3 && memcmp(order, "cba", 3) == 0, "reset runs the hooks newest first");
	ah_arena_reset(a);
	ok(norder == 3, "hooks run once");
	p = ah_alloc(a, 10);
	ok(p != NULL && p[0] == 0, "the arena is usable after reset");
	ah_arena_on_cleanup(a, hook, &ca);
	ah_arena_destroy(a);
	ok(norder == 4 && order[3] == 'a', "destroy runs pending hooks");
	ah_arena_destroy(NULL);
	ok(1, "destroy(NULL) is harmless");
}

/* ---- config ---- */

static void test_config(void)
{
	char path[] = "/tmp/ah-test-config-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	fputs("# comment\n\n  db_user   =   spaced value  \ndb_port = 17\n"
	      "db_name = first\ndb_name = second\nmodel_key_name = from-file\n", f);
	fclose(f);
	ah_config *c = NULL;
	ah_err err = {0};
	setenv("AGENTHOST_MODEL_KEY_NAME", "from-env", 1);
	ok(ah_config_load(&c, path, &err) == 0 && c, "config_load reads the file");
	unsetenv("AGENTHOST_MODEL_KEY_NAME");
	ok(strcmp(ah_cfg_str(c, AH_CFG_DB_USER), "spaced value") == 0, "keys and values are trimmed");
	ok(strcmp(ah_cfg_str(c, AH_CFG_DB_PASSWORD), "") == 0 && !ah_cfg_opt(c, AH_CFG_DB_PASSWORD),
	   "missing key gives the default");
	ok(strcmp(ah_cfg_str(c, AH_CFG_DB_NAME), "second") == 0, "the last occurrence wins");
	ok(strcmp(ah_cfg_str(c, AH_CFG_MODEL_KEY_NAME), "from-env") == 0,
	   "AGENTHOST_<KEY> overrides the file");
	ok(ah_cfg_int(c, AH_CFG_DB_PORT) == 17, "cfg_int reads an integer");
	ok(ah_cfg_int(c, AH_CFG_RATE_LIMIT_CRUD) == 100, "cfg_int of a missing key gives the default");
	ah_config_free(c);
	unlink(path);
	c = NULL;
	ok(ah_config_load(&c, "/nonexistent/agenthost.conf", &err) == AH_ENOTFOUND && c == NULL,
	   "a missing config file is AH_ENOTFOUND");
}

/* ---- ah_log_escape ---- */

static const struct {
	const char *what, *in;
	size_t len;
	const char *want;
} esc_cases[] = {
	{"plain text stays", "npm WARN deprecated", 19, "npm WARN deprecated"},
	{"a CR cannot rewind the line", "ok\rINFO forged", 14, "ok\\x0dINFO forged"},
	{"ANSI colour and cursor escapes", "\x1b[31mred\x1b[2K", 12, "\\x1b[31mred\\x1b[2K"},
	{"a backslash is escaped itself", "\\x1b", 4, "\\x5cx1b"},
	{"NUL, TAB, DEL", "a\0b\tc\x7f", 6, "a\\x00b\\x09c\\x7f"},
	{"valid UTF-8 stays", "Gr\xc3\xbc\xc3\x9f\x65 \xe2\x82\xac \xf0\x9f\x98\x80", 16,
	 "Gr\xc3\xbc\xc3\x9f\x65 \xe2\x82\xac \xf0\x9f\x98\x80"},
	{"a C1 control (U+009B, CSI) is escaped", "a\xc2\x9b" "2J", 5, "a\\xc2\\x9b2J"},
	{"U+00A0 is not C1", "\xc2\xa0", 2, "\xc2\xa0"},
	{"line separator U+2028", "a\xe2\x80\xa8" "b", 5, "a\\xe2\\x80\\xa8b"},
	{"bidi override U+202E", "\xe2\x80\xae" "txt", 6, "\\xe2\\x80\\xaetxt"},
	{"bidi isolate U+2066", "\xe2\x81\xa6", 3, "\\xe2\\x81\\xa6"},
	{"invalid bytes one by one", "a\xff\xfe" "b", 4, "a\\xff\\xfeb"},
	{"a lone C1 byte is invalid UTF-8", "\x9b" "31m", 4, "\\x9b31m"},
	{"truncated sequence", "\xe2\x82", 2, "\\xe2\\x82"},
	{"overlong slash", "\xc0\xaf", 2, "\\xc0\\xaf"},
	{"surrogate", "\xed\xa0\x80", 3, "\\xed\\xa0\\x80"},
};

static void test_log_escape(void)
{
	char out[256];
	size_t n;
	for (size_t i = 0; i < sizeof(esc_cases) / sizeof(esc_cases[0]); i++) {
		size_t took = ah_log_escape(out, &n, sizeof out, esc_cases[i].in, esc_cases[i].len);
		ok(took == esc_cases[i].len && n == strlen(esc_cases[i].want) &&
		   strcmp(out, esc_cases[i].want) == 0, "log_escape: %s", esc_cases[i].what);
	}
	/* Output space runs out: only whole escapes, the rest is left for the next line. */
	size_t took = ah_log_escape(out, &n, 16, "ab\x1b\x1b\x1b\x1b", 6);
	ok(took == 5 && n == 14 && strcmp(out, "ab\\x1b\\x1b\\x1b") == 0,
	   "log_escape: stops before an escape that does not fit");
	took = ah_log_escape(out, &n, 16, "\xe2\x80\xae", 3);
	ok(took == 3 && n == 12, "log_escape: one escaped 3-byte character fits the smallest buffer");
	took = ah_log_escape(out, &n, 16, "", 0);
	ok(took == 0 && n == 0 && out[0] == '\0', "log_escape: empty input");
}

/* The line helpers the server's config and the CLI share (core/util.h). */
static void test_trim_chomp(void)
{
	char a[] = " \t key = value \r\n", b[] = "line\r\n", c[] = "line\n", d[] = "a\n\n", e[] = "";
	ok(strcmp(ah_trim(a), "key = value") == 0, "trim cuts white space at both ends");
	ah_chomp(b);
	ah_chomp(c);
	ah_chomp(d);
	ah_chomp(e);
	ok(strcmp(b, "line") == 0 && strcmp(c, "line") == 0, "chomp cuts a \\r\\n or \\n ending");
	ok(strcmp(d, "a\n") == 0 && *e == 0, "chomp cuts one line ending only, and leaves \"\" alone");
}

int main(void)
{
	randombytes_set_implementation(&counted);
	if (sodium_init() < 0)
		return 1;
	ah_arena *a = ah_arena_new();
	test_id_draws(a);
	test_parse_ll();
	test_trim_chomp();
	test_utf8();
	test_time(a);
	test_db_time_ms();
	test_ids(a);
	ah_arena_destroy(a);
	test_arena();
	test_config();
	test_log_escape();
	printf("1..%d\n", ntest);
	return nfail != 0;
}
