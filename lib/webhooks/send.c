/* One delivery attempt's request: a POST of the record, signed now, that may
 * only connect to an address the policy allows (checked on the address the
 * connection actually reaches, whatever the name resolved to at enqueue:
 * DNS rebinding gets nowhere), never follows a redirect and gives up after
 * webhook_timeout_seconds. */
#include "webhooks/daemon.h"
#include "core/util.h"

#include <string.h>
#include <sys/socket.h>
#include <time.h>

static curl_socket_t open_checked(void *ud, curlsocktype purpose, struct curl_sockaddr *sa)
{
	ah_whd_job *j = ud;
	(void)purpose;
	enum ah_addr_kind k = ah_addr_policy_check(j->policy, &sa->addr);
	if (k != AH_ADDR_PUBLIC) {
		j->refused = k == AH_ADDR_FORBIDDEN ? 2 : 1;
		return CURL_SOCKET_BAD;
	}
	return socket(sa->family, sa->socktype | SOCK_CLOEXEC, sa->protocol);
}

/* The receiver's answer is not kept: only its status code is. */
static size_t discard(char *p, size_t sz, size_t n, void *ud)
{
	(void)p, (void)ud;
	return sz * n;
}

static struct curl_slist *headers(ah_whd_job *j, const char *secret)
{
	char sig[AH_WEBHOOK_SIG_HEX];
	int64_t t = (int64_t)time(NULL);
	ah_webhook_sign(sig, secret, t, j->payload, j->len);
	const char *lines[] = {
		"Content-Type: application/json",
		"Expect:", /* no 100-continue round trip */
		ah_sprintf(j->a, "Agenthost-Signature: t=%lld,v1=%s", (long long)t, sig),
		ah_sprintf(j->a, "Agenthost-Delivery: %s", j->id),
		ah_sprintf(j->a, "Agenthost-Invocation: %s", j->invocation_id),
		ah_sprintf(j->a, "Agenthost-Attempt: %lld", j->attempts + 1),
	};
	struct curl_slist *h = NULL, *next;
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		if (!(next = curl_slist_append(h, lines[i]))) {
			curl_slist_free_all(h);
			return NULL;
		}
		h = next;
	}
	return h;
}

int ah_whd_send(ah_whd *d, ah_whd_job *j, const char *secret)
{
	long timeout_ms = (long)d->set->timeout_seconds * 1000L;
	if (!(j->h = curl_easy_init()) || !(j->headers = headers(j, secret)))
		return AH_EFAIL;
	CURL *c = j->h;
	curl_easy_setopt(c, CURLOPT_URL, j->url);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, j->payload);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)j->len);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, j->headers);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_checked);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, j);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR,
	                 d->set->allow_http ? "http,https" : "https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "agenthost-webhooks/1");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, j->errbuf);
	curl_easy_setopt(c, CURLOPT_PRIVATE, j);
	j->start_us = ah_mono_us();
	return curl_multi_add_handle(d->multi, c) == CURLM_OK ? 0 : AH_EFAIL;
}

void ah_whd_outcome(const ah_whd_job *j, CURLcode rc, long *status, const char **error)
{
	*status = 0;
	*error = NULL;
	if (j->refused == 2) {
		*error = "refused: the host resolves to a link-local or cloud metadata address";
	} else if (j->refused == 1) {
		*error = "refused: the host resolves to a loopback, private or CGNAT address "
		         "(an operator can allow one with webhook_allow_hosts)";
	} else if (rc != CURLE_OK) {
		/* curl's own detail when it has one: it names the host and port. */
		*error = j->errbuf[0] ? ah_strdup(j->a, j->errbuf) : curl_easy_strerror(rc);
	} else {
		curl_easy_getinfo(j->h, CURLINFO_RESPONSE_CODE, status);
		if (*status < 200 || *status > 299)
			*error = ah_sprintf(j->a, "the receiver answered HTTP %ld", *status);
	}
}
