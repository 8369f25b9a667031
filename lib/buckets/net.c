/* The connections /test makes: every one through a libcurl handle set up here,
 * so each is checked on the address it actually connects to (the
 * opensocket callback sees the resolved address, whatever the name said or
 * resolves to a moment later), capped at 10 s, without redirects, and its
 * failure turned into a sentence a person can act on. */
#include "buckets/internal.h"
#include "core/netaddr.h"
#include "core/util.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static curl_socket_t open_checked(void *ud, curlsocktype purpose, struct curl_sockaddr *a)
{
	ah_bucket_guard *g = ud;
	(void)purpose;
	enum ah_addr_kind k = ah_addr_policy_check(&g->policy, &a->addr);
	if (k != AH_ADDR_PUBLIC) {
		g->refused = k == AH_ADDR_FORBIDDEN ? 2 : 1;
		return CURL_SOCKET_BAD;
	}
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

void ah_bucket_guard_apply(ah_bucket_guard *g, CURL *c)
{
	curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_checked);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, g);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	/* One budget for all of a test's requests (gcs makes two). */
	long ms = AH_BUCKET_TIMEOUT_S * 1000L;
	if (g->deadline_ms > 0) {
		int64_t left = g->deadline_ms - ah_now_ms();
		ms = left < 1 ? 1 : left < ms ? (long)left : ms;
	}
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "agenthost-buckets/1");
}

/* The host part of url for messages: never a path, query or credentials. */
static const char *host_of(ah_arena *a, const char *url)
{
	const char *p = strstr(url, "://");
	p = p ? p + 3 : url;
	return ah_sprintf(a, "%.*s", (int)strcspn(p, "/?#"), p);
}

const char *ah_bucket_curl_message(ah_arena *a, const ah_bucket_guard *g, int code,
                                   const char *url)
{
	const char *h = host_of(a, url);
	if (g->refused == 2)
		return ah_sprintf(a, "%s resolves to a link-local or cloud metadata address, which "
		                  "is never allowed", h);
	if (g->refused == 1)
		return ah_sprintf(a, "%s resolves to a loopback, private or CGNAT address; endpoints "
		                  "must be outside addresses (an operator can allow private ones with "
		                  "storage_allow_hosts)", h);
	switch ((CURLcode)code) {
	case CURLE_COULDNT_RESOLVE_HOST:
		return ah_sprintf(a, "Could not resolve %s: check the endpoint's host name", h);
	case CURLE_COULDNT_CONNECT:
		return ah_sprintf(a, "Could not connect to %s: the endpoint is unreachable or "
		                  "refused the connection; check endpoint_url", h);
	case CURLE_OPERATION_TIMEDOUT:
		return ah_sprintf(a, "%s did not answer within %d seconds (timed out)", h,
		                  AH_BUCKET_TIMEOUT_S);
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE:
		return ah_sprintf(a, "TLS handshake with %s failed (%s): check that the endpoint "
		                  "serves HTTPS with a valid certificate", h,
		                  curl_easy_strerror((CURLcode)code));
	case CURLE_GOT_NOTHING:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_WEIRD_SERVER_REPLY:
		return ah_sprintf(a, "%s closed the connection or did not answer as an HTTP server; "
		                  "check the endpoint's scheme and port", h);
	default:
		return ah_sprintf(a, "The request to %s failed: %s", h, curl_easy_strerror((CURLcode)code));
	}
}

static size_t collect(char *p, size_t sz, size_t n, void *ud)
{
	ah_bucket_body *b = ud;
	size_t len = sz * n, take = len;
	if (b->len + take > sizeof(b->buf) - 1)
		take = sizeof(b->buf) - 1 - b->len;
	memcpy(b->buf + b->len, p, take);
	b->len += take;
	b->buf[b->len] = '\0';
	return len;
}

int ah_bucket_http(ah_arena *a, const ah_bucket_guard *guard, const char *url,
                   const char *post, const char *auth_header, long *status,
                   ah_bucket_body *body, const char **message)
{
	ah_bucket_guard g = *guard;
	struct curl_slist *h = NULL;
	CURL *c = curl_easy_init();
	if (!c)
		return AH_EFAIL;
	ah_bucket_guard_apply(&g, c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	if (post) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, post);
		h = curl_slist_append(h, "Content-Type: application/x-www-form-urlencoded");
	}
	if (auth_header)
		h = curl_slist_append(h, auth_header);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	body->len = 0;
	body->buf[0] = '\0';
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
	CURLcode rc = curl_easy_perform(c);
	*status = 0;
	*message = NULL;
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	else
		*message = ah_bucket_curl_message(a, &g, rc, url);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return 0;
}
