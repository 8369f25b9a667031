/* Unit test of lib/core/redact.c: secret values replaced in a stream that
 * arrives in chunks of every size (a secret split across writes), longest
 * value first, a possible secret at the end of the stream redacted, and the
 * kept window cut after redaction, never starting inside a marker. Each case
 * is fed whole and at every split point and byte by byte: the output must
 * not depend on how the bytes came. */
#include "core/redact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

static char out[4096];
static size_t out_len;

static void sink(void *ctx, const char *b, size_t n)
{
	(void)ctx;
	if (out_len + n < sizeof out) {
		memcpy(out + out_len, b, n);
		out_len += n;
	}
}

static const struct {
	const char *why, *in, *want;
	const char *vals[3];
} cases[] = {
	{"no values: unchanged", "hello", "hello", {NULL}},
	{"one secret", "key=s3cr3t!\n", "key=[redacted]\n", {"s3cr3t!"}},
	{"twice, back to back", "s3cr3ts3cr3t", "[redacted][redacted]", {"s3cr3t"}},
	{"the longer of two that share a start", "x abcdef y", "x [redacted] y", {"abc", "abcdef"}},
	{"the shorter when the longer does not follow", "x abcdz", "x [redacted]dz", {"abcdef", "abc"}},
	{"a start of a secret at the end is redacted", "tail: s3cr", "tail: [redacted]", {"s3cr3t"}},
	{"a near miss passes", "s3cr3x s3cr", "s3cr3x [redacted]", {"s3cr3t"}},
	{"empty values are ignored", "abc", "abc", {""}},
	{"overlapping start", "sss3cr3t", "ss[redacted]", {"s3cr3t"}},
};

static void feed(ah_redact *r, const char *in, size_t split)
{
	size_t n = strlen(in);
	if (split == (size_t)-1) {
		for (size_t i = 0; i < n; i++)
			ah_redact_write(r, in + i, 1);
	} else {
		ah_redact_write(r, in, split);
		ah_redact_write(r, in + split, n - split);
	}
	ah_redact_end(r);
}

static void test_cases(void)
{
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		size_t nv = 0, n = strlen(cases[c].in);
		while (nv < 3 && cases[c].vals[nv])
			nv++;
		int good = 1;
		for (size_t split = 0; split <= n + 1; split++) {
			out_len = 0;
			ah_redact *r = ah_redact_new(cases[c].vals, nv, 0, sink, NULL);
			feed(r, cases[c].in, split == n + 1 ? (size_t)-1 : split);
			ah_redact_free(r);
			if (out_len != strlen(cases[c].want) || memcmp(out, cases[c].want, out_len) != 0)
				good = 0;
		}
		ok(good, "%s", cases[c].why);
	}
}

/* A window of 20 bytes whose cut falls inside the marker of a secret: it
 * starts after the marker, holds no part of the secret, says it was cut. */
static void test_window(void)
{
	const char *vals[] = {"0123456789ABCDEF"};
	ah_redact *r = ah_redact_new(vals, 1, 20, NULL, NULL);
	const char *in = "aaaaaaaaaa0123456789ABCDEFbbbbbbbbbbbbbbbb";
	for (size_t i = 0; in[i]; i += 7)
		ah_redact_write(r, in + i, strlen(in + i) < 7 ? strlen(in + i) : 7);
	ah_redact_end(r);
	size_t len;
	bool cut;
	const char *k = ah_redact_kept(r, &len, &cut);
	ok(cut && len == 16 && memcmp(k, "bbbbbbbbbbbbbbbb", 16) == 0,
	   "a window cut inside a marker starts after it (%zu bytes)", len);
	ah_redact_free(r);

	r = ah_redact_new(vals, 1, 64, NULL, NULL);
	ah_redact_write(r, "short", 5);
	ah_redact_end(r);
	k = ah_redact_kept(r, &len, &cut);
	ok(!cut && len == 5 && memcmp(k, "short", 5) == 0, "a stream under the window is kept whole");
	ah_redact_free(r);

	/* Many chunks, far past the window: the window is the stream's end. */
	r = ah_redact_new(vals, 1, 100, NULL, NULL);
	char line[64];
	for (int i = 0; i < 1000; i++) {
		int n = snprintf(line, sizeof line, "line %d 0123456789AB", i);
		ah_redact_write(r, line, (size_t)n);
		ah_redact_write(r, "CDEF\n", 5);
	}
	ah_redact_end(r);
	k = ah_redact_kept(r, &len, &cut);
	int clean = len <= 100 && cut && memmem(k, len, "line 999 [redacted]\n", 20) &&
	            !memmem(k, len, "0123", 4) && !memmem(k, len, "CDEF", 4);
	ok(clean, "a long stream: the window is its redacted end");
	ah_redact_free(r);
}

/* Random streams over a two-letter alphabet with values that overlap each
 * other and themselves, fed whole and in random chunks: the same output,
 * and no value left in it. */
static void test_random_chunks(void)
{
	static const char *vals[] = {"abba", "ab", "bbbab", "aaaaaaab"};
	char in[600], whole[4096];
	size_t whole_len;
	int same = 1, clean = 1;
	srand(29);
	for (int round = 0; round < 300; round++) {
		size_t n = (size_t)(rand() % (int)sizeof in);
		for (size_t i = 0; i < n; i++)
			in[i] = rand() % 3 ? 'b' : 'a';
		out_len = 0;
		ah_redact *r = ah_redact_new(vals, 4, 0, sink, NULL);
		ah_redact_write(r, in, n);
		ah_redact_end(r);
		ah_redact_free(r);
		memcpy(whole, out, out_len);
		whole_len = out_len;
		out_len = 0;
		r = ah_redact_new(vals, 4, 0, sink, NULL);
		for (size_t off = 0; off < n;) {
			size_t k = (size_t)(rand() % 7);
			k = k > n - off ? n - off : k;
			ah_redact_write(r, in + off, k);
			off += k;
		}
		ah_redact_end(r);
		ah_redact_free(r);
		same &= out_len == whole_len && memcmp(out, whole, out_len) == 0;
		/* Markers aside, what is left holds no value whole. */
		whole[whole_len] = '\0';
		for (char *m; (m = strstr(whole, AH_REDACT_MARK));)
			memset(m, '.', strlen(AH_REDACT_MARK));
		for (size_t v = 0; v < 4; v++)
			clean &= strstr(whole, vals[v]) == NULL;
	}
	ok(same, "random chunking never changes the output");
	ok(clean, "no value is left in random streams");
}

int main(void)
{
	test_cases();
	test_window();
	test_random_chunks();
	return tap_done();
}
