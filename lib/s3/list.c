/* ListObjectsV2, page by page. The answer is small XML of a fixed shape, read
 * by looking for the few elements it needs rather than with an XML library. */
#include "s3/s3.h"
#include "s3/internal.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

#define LIST_CAP (4 << 20)

struct buf {
	char *p;
	size_t n, cap;
};

static size_t collect(char *p, size_t sz, size_t n, void *ud)
{
	struct buf *b = ud;
	size_t len = sz * n;
	if (b->n + len + 1 > LIST_CAP)
		return 0; /* aborts the transfer: a listing page is never this large */
	if (b->n + len + 1 > b->cap) {
		size_t cap = (b->n + len + 1) * 2;
		char *q = realloc(b->p, cap);
		if (!q)
			return 0;
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->n, p, len);
	b->n += len;
	b->p[b->n] = '\0';
	return len;
}

/* Text of the first <tag>…</tag> in [p, end) with XML entities decoded into out;
 * returns the position after it, or NULL. */
static const char *element(const char *p, const char *end, const char *tag, char *out,
                           size_t cap)
{
	char open[64], close[64];
	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	const char *a = memmem(p, (size_t)(end - p), open, strlen(open));
	if (!a)
		return NULL;
	a += strlen(open);
	const char *b = memmem(a, (size_t)(end - a), close, strlen(close));
	if (!b)
		return NULL;
	static const struct { const char *ent; char c; } ents[] = {
		{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''},
	};
	size_t o = 0;
	for (const char *q = a; q < b && o + 1 < cap;) {
		size_t i;
		for (i = 0; i < sizeof(ents) / sizeof(ents[0]); i++)
			if ((size_t)(b - q) >= strlen(ents[i].ent) &&
			    memcmp(q, ents[i].ent, strlen(ents[i].ent)) == 0)
				break;
		if (i < sizeof(ents) / sizeof(ents[0])) {
			out[o++] = ents[i].c;
			q += strlen(ents[i].ent);
		} else {
			out[o++] = *q++;
		}
	}
	out[o] = '\0';
	return b + strlen(close);
}

/* Calls fn for each <Contents> of one page; sets next to the continuation token
 * ("" on the last page). */
static int walk_page(const struct buf *b, ah_s3_list_fn fn, void *ud, char *next, size_t ncap)
{
	const char *p = b->p, *end = b->p + b->n;
	char key[1100], size[32];
	for (;;) {
		const char *c = memmem(p, (size_t)(end - p), "<Contents>", 10);
		if (!c)
			break;
		const char *ce = memmem(c, (size_t)(end - c), "</Contents>", 11);
		if (!ce)
			break;
		long long sz = -1;
		if (element(c, ce, "Key", key, sizeof(key)) && element(c, ce, "Size", size, sizeof(size)))
			(void)ah_parse_ll(&sz, size);
		int stop = fn(ud, key, (int64_t)sz);
		if (stop)
			return stop;
		p = ce + 11;
	}
	char trunc[8] = "";
	next[0] = '\0';
	if (element(b->p, end, "IsTruncated", trunc, sizeof(trunc)) && strcmp(trunc, "true") == 0)
		element(b->p, end, "NextContinuationToken", next, ncap);
	return 0;
}

int ah_s3_list(const ah_s3 *s, const char *prefix, int max_keys, ah_s3_list_fn fn,
               void *ud, ah_err *err)
{
	char token[1100] = "", etok[3300], epre[3300], query[7000], url[9000];
	char userpwd[260], sigv4[96];
	if (max_keys < 1 || max_keys > 1000)
		return ah_err_set(err, AH_EINVALID, "s3 list: max_keys must be 1..1000");
	if (ah_s3_uri_encode(epre, sizeof(epre), prefix ? prefix : "", 0))
		return ah_err_set(err, AH_EINVALID, "s3 list: prefix too long");
	snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", s->region);
	snprintf(userpwd, sizeof(userpwd), "%s:%s", s->access_key, s->secret_key);
	int rc = 0;
	do {
		if (ah_s3_uri_encode(etok, sizeof(etok), token, 0))
			return ah_err_set(err, AH_EFAIL, "s3 list: continuation token too long");
		/* Query parameters sorted by name: libcurl signs them as given. */
		snprintf(query, sizeof(query), "%s%s%slist-type=2&max-keys=%d&prefix=%s",
		         *token ? "continuation-token=" : "", etok, *token ? "&" : "", max_keys, epre);
		snprintf(url, sizeof(url), "%s%s%s?%s", s->endpoint, *s->bucket ? "/" : "",
		         s->bucket, query);
		struct buf b = {0};
		struct curl_slist *h = curl_slist_append(NULL, "x-amz-content-sha256: "
		                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
		CURL *c = curl_easy_init();
		if (!c || !h) {
			rc = ah_err_set(err, AH_EFAIL, "s3 list: out of memory");
		} else {
			curl_easy_setopt(c, CURLOPT_URL, url);
			curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
			curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
			curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4);
			curl_easy_setopt(c, CURLOPT_USERPWD, userpwd);
			curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
			curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
			curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
			curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
			if (s->hooks && s->hooks->prepare)
				s->hooks->prepare(s->hooks->ud, c);
			CURLcode cc = curl_easy_perform(c);
			long st = 0;
			curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
			if (s->hooks && s->hooks->done)
				s->hooks->done(s->hooks->ud, (int)cc, cc == CURLE_OK ? st : 0);
			if (cc != CURLE_OK)
				rc = ah_err_set(err, AH_EFAIL, "s3 list: %s", curl_easy_strerror(cc));
			else if (st != 200 || !b.p)
				rc = ah_err_set(err, st == 404 ? AH_ENOTFOUND : AH_EFAIL, "s3 list: HTTP %ld", st);
			else
				rc = walk_page(&b, fn, ud, token, sizeof(token));
		}
		if (c)
			curl_easy_cleanup(c);
		curl_slist_free_all(h);
		free(b.p);
	} while (rc == 0 && *token);
	memset(userpwd, 0, sizeof(userpwd));
	return rc;
}
