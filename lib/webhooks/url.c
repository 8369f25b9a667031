/* Webhook URL rules: see webhooks.h. The address policy is core/netaddr's,
 * the one bucket endpoints and git clones follow. */
#include "webhooks/webhooks.h"
#include "core/util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int bad(ah_err *err, const char *why)
{
	return ah_err_set(err, AH_EINVALID, "%s", why);
}

ah_addr_policy ah_webhook_policy(const ah_webhook_settings *set)
{
	return (ah_addr_policy){.allow_private = false, .allow_hosts = set->allow_hosts};
}

/* host[:port] after the scheme: [v6] or up to ':' '/' '?' or the end. */
static int split_authority(char *host, size_t n, long *port, const char *p)
{
	const char *end, *rest;
	if (*p == '[') {
		end = strchr(++p, ']');
		rest = end ? end + 1 : NULL;
	} else {
		end = p + strcspn(p, ":/?");
		rest = end;
	}
	if (!end || end == p || (size_t)(end - p) >= n)
		return AH_EINVALID;
	memcpy(host, p, (size_t)(end - p));
	host[end - p] = '\0';
	if (*rest != ':')
		return (*rest && !strchr("/?", *rest)) ? AH_EINVALID : 0;
	char *e;
	long v = strtol(rest + 1, &e, 10);
	*port = v;
	return (e == rest + 1 || v < 1 || v > 65535 || (*e && !strchr("/?", *e))) ? AH_EINVALID : 0;
}

int ah_webhook_url_check(const char *url, const ah_webhook_settings *set, ah_err *err)
{
	bool http_ok = set->allow_http;
	const char *p;
	long port = 443;
	if (strlen(url) > AH_WEBHOOK_URL_MAX)
		return bad(err, "URL should have at most 2048 characters");
	if (!strncasecmp(url, "https://", 8)) {
		p = url + 8;
	} else if (http_ok && !strncasecmp(url, "http://", 7)) {
		p = url + 7;
		port = 80;
	} else {
		return bad(err, http_ok ? "URL should start with https:// or http://"
		                        : "URL should start with https:// (webhooks are sent over TLS)");
	}
	for (const char *c = url; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f || *c == '\\')
			return bad(err, "URL should not contain spaces, control characters or backslashes");
	if (memchr(p, '@', strcspn(p, "/?#")))
		return bad(err, "URL should not contain credentials (the signature authenticates us)");
	if (strchr(p, '#'))
		return bad(err, "URL should not have a fragment");
	char host[256];
	if (split_authority(host, sizeof(host), &port, p) != 0)
		return bad(err, "URL should name a host (and a port from 1 to 65535)");
	ah_addr_policy pol = ah_webhook_policy(set);
	int kind = ah_addr_host_kind(host, *p == '[', port, &pol);
	if (kind == -2)
		return bad(err, "URL's host is neither a name nor a valid IP address");
	if (kind == AH_ADDR_FORBIDDEN)
		return bad(err, "URL names a link-local or cloud metadata address, which is never allowed");
	if (kind == AH_ADDR_PRIVATE)
		return bad(err, "URL names a loopback, private or CGNAT address; webhooks go to outside "
		           "addresses (an operator can allow private ones with webhook_allow_hosts)");
	return 0;
}
