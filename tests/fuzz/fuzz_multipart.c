/* Fuzz target: a multipart/form-data upload as POST /files streams it. Input:
 * CONTENT-TYPE "\n" BODY; the body is handed over in pieces whose sizes the
 * input also decides (as the FastCGI stream would). Properties: the parts'
 * data never adds up to more than the body; a part's filename length is
 * within its buffer; begin/data/end come in order. */
#include "http/http.h"
#include "split.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct src {
	const char *p;
	size_t left, step;
};

static ssize_t rd(void *ud, char *buf, size_t n)
{
	struct src *s = ud;
	size_t k = s->step ? s->step : 1;
	k = k > n ? n : k > s->left ? s->left : k;
	memcpy(buf, s->p, k);
	s->p += k;
	s->left -= k;
	s->step = s->step * 7 % 4093 + 1; /* varying piece sizes */
	return (ssize_t)k;
}

struct sink {
	size_t data, parts;
	bool open;
};

static int begin(void *ud, const ah_mp_part *p)
{
	struct sink *k = ud;
	if (k->open || p->filename_len > AH_MP_FILENAME_MAX)
		__builtin_trap();
	k->open = true;
	k->parts++;
	return 0;
}

static int data(void *ud, const char *buf, size_t n)
{
	struct sink *k = ud;
	(void)buf;
	if (!k->open)
		__builtin_trap();
	k->data += n;
	return 0;
}

static int end(void *ud)
{
	struct sink *k = ud;
	if (!k->open)
		__builtin_trap();
	k->open = false;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
	char *ct, *body;
	size_t blen;
	if (fuzz_split(in, size, &ct, &body, &blen) != 0)
		return 0;
	ah_arena *a = ah_arena_new();
	const char *boundary = ah_multipart_boundary(a, ct);
	if (boundary) {
		struct src s = { body, blen, (size_t)(size % 97) + 1 };
		struct sink k = { 0 };
		ah_mp_sink sk = { begin, data, end };
		char why[256] = "";
		ah_multipart_parse(rd, &s, boundary, &sk, &k, why, sizeof why);
		if (k.data > blen)
			__builtin_trap();
	}
	ah_arena_destroy(a);
	free(ct);
	free(body);
	return 0;
}
