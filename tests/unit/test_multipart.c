/* The streaming multipart parser: one row per body, fed in reads of every size
 * from 1 byte up (a delimiter split anywhere across reads must still be found),
 * checking what the sink saw or the error. */
#include <stdio.h>
#include <string.h>

#include "http/http.h"
#include "tap.h"

struct src {
	const char *p;
	size_t n, off, step;
};

static ssize_t rd(void *v, char *buf, size_t n)
{
	struct src *s = v;
	size_t k = s->n - s->off;
	if (k > n)
		k = n;
	if (k > s->step)
		k = s->step;
	memcpy(buf, s->p + s->off, k);
	s->off += k;
	return (ssize_t)k;
}

/* What the sink saw, as text: "name|filename|type=data;" per part. */
struct seen {
	char out[4096];
	size_t n;
};

static int begin(void *ud, const ah_mp_part *p)
{
	struct seen *s = ud;
	s->n += (size_t)snprintf(s->out + s->n, sizeof(s->out) - s->n, "%s|%.*s|%s=", p->name,
	                         (int)p->filename_len, p->filename, p->content_type);
	return 0;
}

static int data(void *ud, const char *b, size_t n)
{
	struct seen *s = ud;
	if (s->n + n < sizeof(s->out)) {
		memcpy(s->out + s->n, b, n);
		s->n += n;
		s->out[s->n] = '\0';
	}
	return 0;
}

static int end(void *ud)
{
	struct seen *s = ud;
	s->n += (size_t)snprintf(s->out + s->n, sizeof(s->out) - s->n, ";");
	return 0;
}

static const struct {
	const char *what, *body, *want; /* want: the sink's record, or "ERR" */
} cases[] = {
	{"one file part",
	 "--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n"
	 "Content-Type: text/plain\r\n\r\nhello\r\n--XX--\r\n",
	 "file|a.txt|text/plain=hello;"},
	{"fields and a file, preamble ignored",
	 "preamble\r\n--XX\r\nContent-Disposition: form-data; name=\"tags\"\r\n\r\na,b\r\n"
	 "--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x\"\r\n\r\n\r\n--X\r\n--XX--",
	 "tags||=a,b;file|x|=\r\n--X;"},
	{"RFC 5987 filename* wins",
	 "--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"e.txt\"; filename*=UTF-8''%E2%82%AC.txt\r\n\r\n1\r\n--XX--",
	 "file|\xe2\x82\xac.txt|=1;"},
	{"quoted filename with escapes", "--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\\\"b\"\r\n\r\n\r\n--XX--",
	 "file|a\"b|=;"},
	{"empty body", "", "ERR"},
	{"no closing boundary", "--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nabc", "ERR"},
	{"truncated in headers", "--XX\r\nContent-Disposition: form-da", "ERR"},
	{"header without colon", "--XX\r\nbogus\r\n\r\nx\r\n--XX--", "ERR"},
	{"junk after boundary", "--XXjunk\r\n\r\nx\r\n--XX--", "ERR"},
	{"not form-data", "--XX\r\nContent-Disposition: attachment\r\n\r\nx\r\n--XX--", "ERR"},
};

int main(void)
{
	char why[256];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int good = 1;
		for (size_t step = 1; step <= 64 && good; step++) {
			struct src s = {cases[i].body, strlen(cases[i].body), 0, step};
			struct seen seen = {"", 0};
			ah_mp_sink sink = {begin, data, end};
			int rc = ah_multipart_parse(rd, &s, "XX", &sink, &seen, why, sizeof(why));
			if (strcmp(cases[i].want, "ERR") == 0)
				good = rc == AH_EINVALID && strncmp(why, "Malformed", 9) == 0;
			else
				good = rc == 0 && strcmp(seen.out, cases[i].want) == 0;
			if (!good)
				printf("# step %zu: rc %d, saw '%s', why '%s'\n", step, rc, seen.out, why);
		}
		ok(good, "%s", cases[i].what);
	}
	ah_arena *a = ah_arena_new();
	const char *b = ah_multipart_boundary(a, "multipart/form-data; boundary=\"a b\"");
	ok(b && strcmp(b, "a b") == 0, "quoted boundary");
	ok(!ah_multipart_boundary(a, "multipart/form-data"), "no boundary: NULL");
	ok(!ah_multipart_boundary(a, "multipart/mixed; boundary=x"), "another multipart type: NULL");
	ah_arena_destroy(a);
	/* A 10 KB filename is reported as too long, not cut silently. */
	static char big[16384];
	int n = snprintf(big, sizeof(big), "--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"");
	memset(big + n, 'a', 10240);
	snprintf(big + n + 10240, sizeof(big) - (size_t)n - 10240, "\"\r\n\r\nx\r\n--XX--");
	struct src s = {big, strlen(big), 0, 4096};
	struct seen seen = {"", 0};
	ah_mp_sink sink = {begin, data, end};
	int rc = ah_multipart_parse(rd, &s, "XX", &sink, &seen, why, sizeof(why));
	ok(rc == 0 && seen.n > 0, "10 KB filename parses (rc %d %s)", rc, rc ? why : "");
	return tap_done();
}
