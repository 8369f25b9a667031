/* Calls to the API over libcurl: one easy handle for the whole run (so calls
 * share a connection), the bearer key, JSON in and out, the API's error body
 * turned into one line, and 429 answers waited out as their Retry-After says. */
#include "cli/cli.h"

#include <curl/curl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdint.h>
#include <errno.h>
#include <unistd.h>

#include "core/util.h"

#define BODY_CAP (64u << 20)   /* no API answer is near this; a runaway one stops here */

struct buf {
	char *p;
	size_t len, cap;
	bool over;
};

struct exchange {
	struct ah_cli *c;
	struct buf body;
	FILE *download;
	long long written;
	bool write_failed;
	int write_errno;
	long long total;
	long retry_after;
	bool progress, up, finished;   /* a bar for the upload (up) or the download */
	const char *waiting;
	int64_t started, drawn;
	size_t (*events)(void *ctx, const char *data, size_t len);
	void *events_ctx;
	bool streamed;                 /* the answer went to events */
};

static void free_json(void *p)
{
	json_object_put(p);
}

json_object *ah_cli_own(struct ah_cli *c, json_object *o)
{
	if (o)
		ah_arena_on_cleanup(c->a, free_json, o);
	return o;
}

json_object *ah_cli_obj(struct ah_cli *c)
{
	return ah_cli_own(c, json_object_new_object());
}

const char *ah_cli_seg(struct ah_cli *c, const char *s)
{
	char *e = curl_easy_escape(c->curl, s, 0);
	const char *out = ah_strdup(c->a, e ? e : "");
	curl_free(e);
	return out;
}

/* A download's bytes go to its file once the status says they are the file's
 * (an error's body is JSON for the error line). */
static bool to_file(struct exchange *x, char *data, size_t len)
{
	long status = 0;
	if (!x->download)
		return false;
	curl_easy_getinfo(x->c->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status < 200 || status >= 300)
		return false;
	if (fwrite(data, 1, len, x->download) != len) {
		x->write_failed = true;
		x->write_errno = errno;
	}
	else
		x->written += (long long)len;
	return true;
}

/* A 2xx server-sent event stream (an error is still JSON). */
static bool is_event_stream(struct exchange *x)
{
	long status = 0;
	char *ct = NULL;
	curl_easy_getinfo(x->c->curl, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(x->c->curl, CURLINFO_CONTENT_TYPE, &ct);
	return status >= 200 && status < 300 && ct && !strncmp(ct, "text/event-stream", 17);
}

static size_t on_body(char *data, size_t size, size_t n, void *userp)
{
	struct exchange *x = userp;
	struct buf *b = &x->body;
	size_t len = size * n;
	if (to_file(x, data, len))
		return x->write_failed ? 0 : len;
	if (x->events && is_event_stream(x)) {
		x->streamed = true;
		return x->events(x->events_ctx, data, len);
	}
	if (b->len + len > BODY_CAP) {
		b->over = true;
		return 0;
	}
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 16384;
		while (cap < b->len + len + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			return 0;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
	b->p[b->len] = 0;
	return len;
}

/* A header's value as a number when the line is "name: number". */
static bool header_num(const char *line, size_t len, const char *name, long long *out)
{
	size_t nlen = strlen(name);
	char v[32];
	if (len <= nlen + 1 || strncasecmp(line, name, nlen) != 0 || line[nlen] != ':')
		return false;
	size_t vlen = len - nlen - 1;
	if (vlen >= sizeof(v))
		return false;
	memcpy(v, line + nlen + 1, vlen);
	v[vlen] = 0;
	char *s = v + strspn(v, " \t");
	s[strcspn(s, " \t\r\n")] = 0;
	return ah_parse_ll(out, s) == 0;
}

static size_t on_header(char *data, size_t size, size_t n, void *userp)
{
	struct exchange *x = userp;
	long long v;
	if (header_num(data, size * n, "X-Total-Count", &v))
		x->total = v;
	else if (header_num(data, size * n, "Retry-After", &v))
		x->retry_after = (long)v;
	return size * n;
}

/* The transfer's bar, at most 10 times a second, and once more at 100% so
 * that a fast transfer still shows it finished. */
static void draw_bar(struct exchange *x, int64_t now, curl_off_t done, curl_off_t total)
{
	bool finished = total > 0 && done >= total;
	if (total <= 0 || (now - x->drawn < 100 && !(finished && !x->finished)))
		return;
	x->drawn = now;
	x->finished = finished;
	ah_cli_status_line(x->c, "%s %3d%%  %.1f of %.1f MB", x->up ? "uploading" : "downloading",
	                   (int)(done * 100 / total), done / 1e6, total / 1e6);
}

static int on_progress(void *userp, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
	struct exchange *x = userp;
	int64_t now = ah_now_ms();
	if (x->progress) {
		draw_bar(x, now, x->up ? ulnow : dlnow, x->up ? ultotal : dltotal);
		return 0;
	}
	if (now - x->drawn < 100)   /* curl calls this often; the eye needs 10 a second */
		return 0;
	x->drawn = now;
	if (x->waiting)
		ah_cli_status_line(x->c, "%s  %.1f s", x->waiting, (double)(now - x->started) / 1000.0);
	return 0;
}

/* 127.0.0.0/8 (also as an IPv4-mapped IPv6 address), ::1 and localhost: a
 * host name other than localhost may resolve anywhere, so it counts as
 * remote, as does anything that is not an address in its plain form. */
static bool loopback_host(const char *host)
{
	struct in_addr v4;
	struct in6_addr v6;
	char bare[64];
	size_t n = strlen(host);
	if (strcasecmp(host, "localhost") == 0 || strcasecmp(host, "localhost.") == 0)
		return true;
	if (inet_pton(AF_INET, host, &v4) == 1)
		return (ntohl(v4.s_addr) >> 24) == 127;
	if (n < 3 || n - 2 >= sizeof(bare) || host[0] != '[' || host[n - 1] != ']')
		return false;
	memcpy(bare, host + 1, n - 2);
	bare[n - 2] = 0;
	if (inet_pton(AF_INET6, bare, &v6) != 1)
		return false;
	return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
}

void ah_cli_warn_plain_http(struct ah_cli *c, const char *url)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL;
	/* As libcurl reads the URL it is given: without a scheme it guesses http. */
	if (!c->warned_plain_http && u && curl_url_set(u, CURLUPART_URL, url, CURLU_GUESS_SCHEME) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK && strcasecmp(scheme, "http") == 0 &&
	    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK && !loopback_host(host)) {
		/* A warning, not a refusal: a private network or a tunnel may be
		 * fine, and the user is the one who knows. */
		fprintf(stderr, "agenthost: warning: the API key goes to %s over plain http://, readable by "
		        "anyone on the way; use an https:// URL\n", host);
		c->warned_plain_http = true;
	}
	curl_free(scheme);
	curl_free(host);
	curl_url_cleanup(u);
}

static void set_body(struct ah_cli *c, const struct ah_cli_req *rq, struct curl_slist **h)
{
	CURL *cu = c->curl;
	if (rq->json) {
		const char *s = json_object_to_json_string_ext(rq->json, JSON_C_TO_STRING_PLAIN);
		curl_easy_setopt(cu, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(s));
		curl_easy_setopt(cu, CURLOPT_COPYPOSTFIELDS, s);
		*h = curl_slist_append(*h, "Content-Type: application/json");
	} else if (rq->upload) {
		rewind(rq->upload);
		curl_easy_setopt(cu, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(cu, CURLOPT_READDATA, rq->upload);
		curl_easy_setopt(cu, CURLOPT_INFILESIZE_LARGE, (curl_off_t)rq->upload_size);
		*h = curl_slist_append(*h, ah_sprintf(c->a, "Content-Type: %s", rq->content_type));
	} else if (rq->mime) {
		curl_easy_setopt(cu, CURLOPT_MIMEPOST, (curl_mime *)rq->mime);
	} else if (strcmp(rq->method, "GET") && strcmp(rq->method, "DELETE")) {
		/* A POST without a body still says so: Content-Length: 0. */
		curl_easy_setopt(cu, CURLOPT_POSTFIELDSIZE, 0L);
		curl_easy_setopt(cu, CURLOPT_POSTFIELDS, "");
	}
	*h = curl_slist_append(*h, "Expect:");
}

static void set_request(struct ah_cli *c, const struct ah_cli_req *rq, struct exchange *x,
                        struct curl_slist **h)
{
	CURL *cu = c->curl;
	const char *url = rq->url ? rq->url : ah_sprintf(c->a, "%s%s", c->url, rq->path);
	curl_easy_reset(cu);
	curl_easy_setopt(cu, CURLOPT_URL, url);
	curl_easy_setopt(cu, CURLOPT_CUSTOMREQUEST, rq->method);
	curl_easy_setopt(cu, CURLOPT_USERAGENT, "agenthost-cli/" AH_CLI_VERSION);
	curl_easy_setopt(cu, CURLOPT_CONNECTTIMEOUT, 15L);
	curl_easy_setopt(cu, CURLOPT_TIMEOUT, rq->timeout ? rq->timeout : 120L);
	curl_easy_setopt(cu, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(cu, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(cu, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(cu, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(cu, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(cu, CURLOPT_XFERINFODATA, x);
	curl_easy_setopt(cu, CURLOPT_NOPROGRESS, rq->progress || rq->waiting ? 0L : 1L);
	/* The key goes in a header only; never to another host on a redirect. */
	curl_easy_setopt(cu, CURLOPT_FOLLOWLOCATION, 0L);
	if (c->key && !rq->url) {
		ah_cli_warn_plain_http(c, url);
		*h = curl_slist_append(*h, ah_sprintf(c->a, "Authorization: Bearer %s", c->key));
	}
	if (!rq->url)
		*h = curl_slist_append(*h, "Accept: application/json");
	set_body(c, rq, h);
	curl_easy_setopt(cu, CURLOPT_HTTPHEADER, *h);
}

/* "detail" of an error body as one line: the message, or for a 422 each
 * field's location and message. */
static const char *detail_line(struct ah_cli *c, json_object *body)
{
	json_object *d;
	if (!body || !json_object_object_get_ex(body, "detail", &d))
		return NULL;
	if (json_object_is_type(d, json_type_string))
		return json_object_get_string(d);
	if (!json_object_is_type(d, json_type_array))
		return json_object_to_json_string(d);
	char *line = "";
	for (size_t i = 0; i < json_object_array_length(d); i++) {
		json_object *e = json_object_array_get_idx(d, i), *loc, *msg;
		const char *where = "";
		if (json_object_object_get_ex(e, "loc", &loc) && json_object_is_type(loc, json_type_array))
			for (size_t k = 0; k < json_object_array_length(loc); k++)
				where = ah_sprintf(c->a, "%s%s%s", where, k ? "." : "",
				                   json_object_get_string(json_object_array_get_idx(loc, k)));
		json_object_object_get_ex(e, "msg", &msg);
		line = ah_sprintf(c->a, "%s%s%s: %s", line, i ? "; " : "", where,
		                  msg ? json_object_get_string(msg) : "invalid");
	}
	return line;
}

static int api_error(struct ah_cli *c, struct ah_cli_resp *out, ah_err *err)
{
	const char *d = detail_line(c, out->body);
	size_t n = strlen(c->url);
	/* The commonest slip: a URL without the API's base path. */
	bool no_base = n < 7 || strcmp(c->url + n - 7, "/api/v1") != 0;
	if (!d)
		d = "the API answered without a detail";
	return ah_err_set(err, AH_EFAIL, "%s (HTTP %ld)%s", d, out->status,
	                  out->status == 404 && no_base ? "; is the URL right? it ends in /api/v1" : "");
}

static int parse_body(struct ah_cli *c, struct exchange *x, struct ah_cli_resp *out)
{
	out->body = NULL;
	if (!x->body.len)
		return 0;
	json_tokener *tok = json_tokener_new();
	out->body = json_tokener_parse_ex(tok, x->body.p, (int)x->body.len);
	json_tokener_free(tok);
	ah_cli_own(c, out->body);
	return 0;
}

/* One exchange; a network failure is AH_CLI_ENET. */
static int exchange_once(struct ah_cli *c, const struct ah_cli_req *rq, struct exchange *x,
                         struct ah_cli_resp *out, ah_err *err)
{
	struct curl_slist *h = NULL;
	set_request(c, rq, x, &h);
	CURLcode rc = curl_easy_perform(c->curl);
	curl_slist_free_all(h);
	if (rq->progress || rq->waiting)
		ah_cli_status_end(c);
	if (rc != CURLE_OK) {
		if (x->body.over)
			return ah_err_set(err, AH_EFAIL, "the API's answer is larger than %u bytes", BODY_CAP);
		if (x->write_failed)
			return ah_err_set(err, AH_EFAIL, "cannot write the download: %s", strerror(x->write_errno));
		return ah_err_set(err, AH_CLI_ENET, "cannot reach %s: %s", c->url, curl_easy_strerror(rc));
	}
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &out->status);
	out->total = x->total;
	out->written = x->written;
	return parse_body(c, x, out);
}

/* A download the API answers with a redirect (the S3 backend's presigned GET):
 * once, to an absolute http(s) URL, without the key. */
static int follow(struct ah_cli *c, const struct ah_cli_req *rq, struct ah_cli_resp *out, ah_err *err)
{
	char *loc = NULL;
	curl_easy_getinfo(c->curl, CURLINFO_REDIRECT_URL, &loc);
	if (!loc || (strncmp(loc, "http://", 7) && strncmp(loc, "https://", 8)))
		return ah_err_set(err, AH_EFAIL, "the API redirected the download without a usable Location (HTTP %ld)",
		                  out->status);
	struct ah_cli_req next = *rq;
	next.url = ah_strdup(c->a, loc);
	return ah_cli_call(c, &next, out, err);
}

int ah_cli_call(struct ah_cli *c, const struct ah_cli_req *rq, struct ah_cli_resp *out, ah_err *err)
{
	memset(out, 0, sizeof(*out));
	for (int waits = 0;; waits++) {
		struct exchange x = {.c = c, .total = -1, .retry_after = -1, .progress = rq->progress,
		                     .waiting = rq->waiting, .started = ah_now_ms(), .download = rq->download,
		                     .up = rq->upload || rq->mime, .events = rq->events,
		                     .events_ctx = rq->events_ctx};
		int rc = exchange_once(c, rq, &x, out, err);
		free(x.body.p);
		if (rc)
			return rc;
		if (rq->download && !rq->url && out->status >= 300 && out->status < 400)
			return follow(c, rq, out, err);
		if (out->status >= 200 && out->status < 300 && !out->body && out->status != 204 &&
		    !rq->url && !rq->download && !x.streamed)
			return ah_err_set(err, AH_EFAIL, "the answer from %s is not JSON (HTTP %ld); is the URL right?",
			                  c->url, out->status);
		if (out->status >= 200 && out->status < 300)
			return 0;
		if (out->status != 429 || x.retry_after < 0 || x.retry_after > c->max_wait ||
		    waits >= 5)
			return api_error(c, out, err);
		/* Said on stderr whatever the output mode: a silent pause looks like a hang. */
		fprintf(stderr, "agenthost: rate limit reached; waiting %ld s as the API asks (Retry-After)\n",
		        x.retry_after);
		sleep((unsigned)x.retry_after + 1);
	}
}

int ah_cli_get(struct ah_cli *c, const char *path, struct ah_cli_resp *out, ah_err *err)
{
	struct ah_cli_req rq = {.method = "GET", .path = path};
	return ah_cli_call(c, &rq, out, err);
}

int ah_cli_send(struct ah_cli *c, const char *method, const char *path, json_object *body,
                struct ah_cli_resp *out, ah_err *err)
{
	struct ah_cli_req rq = {.method = method, .path = path, .json = body};
	return ah_cli_call(c, &rq, out, err);
}
