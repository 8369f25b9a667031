/* The model gateway, the provider's side: the request forwarded with the
 * real key, the answer streamed back and metered. See gateway_int.h. */
#include "runner/gateway_int.h"

#include "core/log.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- the provider's answer, streamed back ---- */

static int send_head(struct exchange *x)
{
	char line[64];
	x->head_sent = true;
	int n = snprintf(line, sizeof line, "HTTP/1.1 %ld %s\r\n", x->status,
	                 x->status < 300 ? "OK" : "Error");
	/* Only a success is billed: a provider's error answer costs nothing, and
	 * is read for its message (a failed invocation names it). */
	if ((x->route->metered && x->status >= 200 && x->status < 300) || x->status >= 400)
		x->meter = ah_gw_meter_new(x->ctype);
	if (gw_send_all(x->fd, line, (size_t)n) != 0 || gw_send_all(x->fd, x->out, x->out_len) != 0)
		return -1;
	return gw_send_all(x->fd, "Connection: close\r\n\r\n", 21);
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	struct exchange *x = ud;
	size_t len = size * n;
	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) { /* a new answer (after a 1xx) */
		/* "HTTP/1.1 200 OK": three digits after the first space, else 502. */
		const char *sp = memchr(p, ' ', len);
		char *end = NULL;
		long st = sp && sp + 4 <= p + len ? strtol(sp + 1, &end, 10) : 0;
		x->status = end == sp + 4 && st >= 100 && st <= 599 ? st : 502;
		x->out_len = 0;
		x->ctype[0] = '\0';
		return len;
	}
	const char *colon = memchr(p, ':', len);
	if (!colon || len > sizeof x->out - x->out_len)
		return len;
	char name[64];
	size_t nl = (size_t)(colon - p);
	if (nl >= sizeof name)
		return len;
	memcpy(name, p, nl);
	name[nl] = '\0';
	if (strcasecmp(name, "content-type") == 0) {
		const char *v = colon + 1, *end = p + len; /* not NUL-terminated */
		while (v < end && *v == ' ')
			v++;
		snprintf(x->ctype, sizeof x->ctype, "%.*s", (int)(end - v), v);
	}
	/* By name only: the provider's cookies, organisation and account headers
	 * are not the agent's business (model_gateway_response_headers). */
	if (gw_policy_header_out(&x->g->policy, name)) {
		memcpy(x->out + x->out_len, p, len);
		x->out_len += len;
	}
	return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct exchange *x = ud;
	size_t len = size * n;
	if (!x->head_sent && send_head(x) != 0)
		x->agent_gone = true;
	/* An answer that can no longer be metered is not passed on further. */
	if (x->meter && ah_gw_meter_feed(x->meter, p, len) != 0)
		return 0;
	/* An agent that stops reading does not stop the metering: the provider
	 * bills the whole answer, so the whole answer is read. */
	if (!x->agent_gone && gw_send_all(x->fd, p, len) != 0)
		x->agent_gone = true;
	return x->agent_gone && !x->meter ? 0 : len;
}

/* The request body streams from the agent to the provider: the runner holds
 * no more of it than curl's buffer, whatever the size. */
static size_t on_read(char *buf, size_t size, size_t n, void *ud)
{
	struct exchange *x = ud;
	size_t want = size * n;
	if (x->body_left <= 0)
		return 0;
	if ((long long)want > x->body_left)
		want = (size_t)x->body_left;
	ssize_t got;
	if (x->body_off < x->in_len) {
		got = (ssize_t)(x->in_len - x->body_off < want ? x->in_len - x->body_off : want);
		memcpy(buf, x->in + x->body_off, (size_t)got);
		x->body_off += (size_t)got;
	} else {
		do
			got = recv(x->fd, buf, want, 0);
		while (got < 0 && errno == EINTR);
		if (got <= 0)
			return CURL_READFUNC_ABORT;
	}
	x->body_left -= got;
	return (size_t)got;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct exchange *x = ud;
	(void)a, (void)b, (void)c, (void)d;
	return atomic_load(&x->g->stopping) ? 1 : 0;
}

static void set_request(struct exchange *x, CURL *c, char *url)
{
	const ah_gateway *g = x->g;
	long long left = g->deadline_ms - gw_mono_ms();
	snprintf(url, 2048, "%s%s", g->upstream, x->target);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(left > 1 ? left : 1));
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, x->hdrs);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
	if (strcmp(x->method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body_left);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, x);
	} else if (strcmp(x->method, "DELETE") == 0) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
	}
}

/* The answer's usage into x->usage. Fail closed: when the provider may have
 * billed the call (a success, or a request sent and no status back) and its
 * usage cannot be read, the invocation's model access ends here. */
/* An error answer: no tokens, its message as "STATUS TYPE: MESSAGE". */
static void provider_error(struct exchange *x)
{
	ah_gateway_usage scratch = {0};
	ah_gw_meter_finish(x->meter, &scratch, NULL);
	snprintf(x->usage.error, sizeof x->usage.error, "%ld %.200s", x->status,
	         scratch.error[0] ? scratch.error : "error");
}

static void meter_end(struct exchange *x, CURL *c)
{
	long sent = 0;
	const char *why = NULL;
	curl_easy_getinfo(c, CURLINFO_REQUEST_SIZE, &sent);
	bool billed = x->status >= 200 && x->status < 300;
	if (x->route->metered && billed && !x->meter)
		why = "the answer ended before its body";
	else if (x->route->metered && billed)
		ah_gw_meter_finish(x->meter, &x->usage, &why);
	else if (x->route->metered && x->status == 0 && sent > 0)
		why = "no answer from the provider";
	else if (x->meter && x->status >= 400)
		provider_error(x);
	else if (x->meter)
		ah_gw_meter_finish(x->meter, &x->usage, NULL);
	x->meter = NULL;
	if (why) {
		char msg[AH_GATEWAY_WHY_LEN];
		snprintf(msg, sizeof msg, "the answer to %.7s %.100s carried no usage the gateway could read "
		         "(%.80s)", x->route->method, x->route->path, why);
		gw_end_access(x->g, msg);
	}
}

/* Forwards the request with the real key in place of the token. */
void gw_forward(struct exchange *x)
{
	char kh[KEY_MAX + 16], url[2048];
	/* No key configured: none is sent, and the provider says so. */
	snprintf(kh, sizeof kh, *x->g->key ? "x-api-key: %s" : "X-No-Model-Key: 1", x->g->key);
	struct curl_slist *l = curl_slist_append(x->hdrs, kh);
	sodium_memzero(kh, sizeof kh);
	CURL *c = l ? curl_easy_init() : NULL;
	if (l)
		x->hdrs = curl_slist_append(l, "Expect:");
	if (!c || !x->hdrs) {
		gw_send_error(x->fd, 500, "api_error", "model gateway: out of memory");
		if (c)
			curl_easy_cleanup(c);
		return;
	}
	set_request(x, c, url);
	CURLcode rc = curl_easy_perform(c);
	if (rc == CURLE_OK && !x->head_sent)
		send_head(x);
	else if (rc != CURLE_OK && !x->head_sent)
		gw_send_error(x->fd, rc == CURLE_OPERATION_TIMEDOUT ? 504 : 502, "api_error",
		           "model gateway: the provider could not be reached");
	x->usage.requests = 1;
	meter_end(x, c);
	curl_easy_cleanup(c);
}

