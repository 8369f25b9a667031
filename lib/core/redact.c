/* See redact.h. The values are tried longest first at each position whose
 * byte starts one of them (a table of first bytes keeps the common case, a
 * byte that starts none, one lookup): a longer value that may still match
 * wins over a shorter one that did, so "abc" never leaves the "def" of a
 * secret "abcdef" behind. */
#include "core/redact.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define MARK_LEN (sizeof AH_REDACT_MARK - 1)
#define CUT_SLACK (MARK_LEN + 4) /* bytes before the window kept to align its cut */

struct ah_redact {
	char **vals;
	size_t *lens, nvals, maxlen;
	bool first[256];
	char *work;                 /* held-back bytes, then the chunk after them */
	size_t hold, work_cap;
	char *keep;                 /* the last keep_max + CUT_SLACK bytes out, or more */
	size_t keep_len, keep_cap, keep_max, total;
	ah_redact_sink sink;
	void *ctx;
};

enum { NONE, FULL, PARTIAL };

static int by_length_desc(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);
	return la < lb ? 1 : la > lb ? -1 : 0;
}

ah_redact *ah_redact_new(const char *const *values, size_t n, size_t keep, ah_redact_sink sink,
                         void *ctx)
{
	ah_redact *r = calloc(1, sizeof *r);
	if (!r || !(r->vals = calloc(n + 1, sizeof *r->vals)) || !(r->lens = calloc(n + 1, sizeof *r->lens)))
		goto fail;
	for (size_t i = 0; i < n; i++) {
		if (!values[i] || !*values[i])
			continue;
		if (!(r->vals[r->nvals] = strdup(values[i])))
			goto fail;
		r->nvals++;
	}
	qsort(r->vals, r->nvals, sizeof *r->vals, by_length_desc);
	for (size_t i = 0; i < r->nvals; i++) {
		r->lens[i] = strlen(r->vals[i]);
		r->first[(unsigned char)r->vals[i][0]] = true;
		if (r->lens[i] > r->maxlen)
			r->maxlen = r->lens[i];
	}
	r->keep_max = keep;
	r->keep_cap = keep ? 2 * (keep + CUT_SLACK) : 0;
	if (keep && !(r->keep = malloc(r->keep_cap)))
		goto fail;
	r->sink = sink;
	r->ctx = ctx;
	return r;
fail:
	ah_redact_free(r);
	return NULL;
}

void ah_redact_free(ah_redact *r)
{
	if (!r)
		return;
	for (size_t i = 0; r->vals && i < r->nvals; i++) {
		sodium_memzero(r->vals[i], strlen(r->vals[i]));
		free(r->vals[i]);
	}
	if (r->work)
		sodium_memzero(r->work, r->work_cap);
	free(r->vals);
	free(r->lens);
	free(r->work);
	free(r->keep);
	free(r);
}

/* Into the kept window: only its last keep_max + CUT_SLACK bytes matter. */
static void keep_append(ah_redact *r, const char *b, size_t n)
{
	size_t want = r->keep_max + CUT_SLACK;
	r->total += n;
	if (!r->keep_max)
		return;
	if (n >= want) {
		memcpy(r->keep, b + n - want, want);
		r->keep_len = want;
		return;
	}
	if (r->keep_len + n > r->keep_cap) {
		size_t retain = want - n;
		memmove(r->keep, r->keep + r->keep_len - retain, retain);
		r->keep_len = retain;
	}
	memcpy(r->keep + r->keep_len, b, n);
	r->keep_len += n;
}

static void emit(ah_redact *r, const char *b, size_t n)
{
	if (!n)
		return;
	if (r->sink)
		r->sink(r->ctx, b, n);
	keep_append(r, b, n);
}

/* Whether a value starts at b (avail bytes there): FULL with its length, or
 * PARTIAL when the bytes end while a value still matches. */
static int match_at(const ah_redact *r, const char *b, size_t avail, size_t *len)
{
	for (size_t i = 0; i < r->nvals; i++) {
		size_t l = r->lens[i];
		if (r->vals[i][0] != b[0])
			continue;
		if (avail >= l && memcmp(b, r->vals[i], l) == 0) {
			*len = l;
			return FULL;
		}
		if (avail < l && memcmp(b, r->vals[i], avail) == 0)
			return PARTIAL;
	}
	return NONE;
}

/* Passes b on with values replaced; returns how many bytes at its end are
 * held back (at the end of the stream: none, they are redacted). */
static size_t scan(ah_redact *r, const char *b, size_t n, bool end)
{
	size_t i = 0, run = 0, len = 0;
	while (i < n) {
		if (!r->first[(unsigned char)b[i]]) {
			i++;
			continue;
		}
		int m = match_at(r, b + i, n - i, &len);
		if (m == NONE) {
			i++;
			continue;
		}
		emit(r, b + run, i - run);
		if (m == PARTIAL && !end)
			return n - i;
		emit(r, AH_REDACT_MARK, MARK_LEN);
		i = m == FULL ? i + len : n;
		run = i;
	}
	emit(r, b + run, n - run);
	return 0;
}

static bool work_room(ah_redact *r, size_t need)
{
	if (need <= r->work_cap)
		return true;
	char *w = malloc(need);
	if (!w)
		return false;
	if (r->work) {
		memcpy(w, r->work, r->hold);
		sodium_memzero(r->work, r->work_cap);
		free(r->work);
	}
	r->work = w;
	r->work_cap = need;
	return true;
}

void ah_redact_set_sink(ah_redact *r, ah_redact_sink sink, void *ctx)
{
	r->sink = sink;
	r->ctx = ctx;
}

void ah_redact_write(ah_redact *r, const char *b, size_t n)
{
	if (!r->nvals) {
		emit(r, b, n);
		return;
	}
	if (!r->hold) { /* the common case: nothing held, no copy */
		size_t h = scan(r, b, n, false);
		if (h && !work_room(r, h)) {
			emit(r, AH_REDACT_MARK, MARK_LEN); /* never pass a possible secret on */
			h = 0;
		} else if (h) {
			memcpy(r->work, b + n - h, h);
		}
		r->hold = h;
		return;
	}
	if (!work_room(r, r->hold + n)) {
		r->hold = 0; /* never pass a possible secret on unchecked */
		emit(r, AH_REDACT_MARK, MARK_LEN);
		return;
	}
	memcpy(r->work + r->hold, b, n);
	size_t all = r->hold + n, h = scan(r, r->work, all, false);
	memmove(r->work, r->work + all - h, h);
	r->hold = h;
}

void ah_redact_end(ah_redact *r)
{
	if (r->hold)
		scan(r, r->work, r->hold, true);
	r->hold = 0;
}

const char *ah_redact_kept(const ah_redact *r, size_t *len, bool *truncated)
{
	size_t start = 0;
	*truncated = r->total > r->keep_max;
	if (*truncated && r->keep_len > r->keep_max) {
		start = r->keep_len - r->keep_max;
		/* A marker cut in two: the window starts after it. */
		for (size_t k = 1; k < MARK_LEN; k++)
			if (start >= k && start - k + MARK_LEN <= r->keep_len &&
			    memcmp(r->keep + start - k, AH_REDACT_MARK, MARK_LEN) == 0) {
				start = start - k + MARK_LEN;
				break;
			}
		for (int k = 0; k < 3 && start < r->keep_len &&
		                ((unsigned char)r->keep[start] & 0xC0) == 0x80; k++)
			start++;
	}
	*len = r->keep_len - start;
	return r->keep ? r->keep + start : "";
}
