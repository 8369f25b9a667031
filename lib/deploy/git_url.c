/* Which repository URLs a deploy may clone, and from which network.
 *
 * A clone is a connection the runner makes on a user's behalf, to a host the
 * user names: without a policy it would reach the host's own services and the
 * cloud metadata address, and the failure text would tell the user what
 * answered there. So:
 *   - only network schemes (never file:// or a local path);
 *   - link-local and cloud metadata addresses are refused whatever the
 *     configuration;
 *   - loopback, private and otherwise special addresses are refused unless the
 *     URL's host:port is on git_allow_hosts (or, development only,
 *     git_allow_private is set);
 *   - every address the host resolves to is checked, and a clone of anything
 *     not allowed that way runs in a network namespace that reaches only the
 *     outside (a sandbox's, see lib/sandbox/net.c), so what libgit2 resolves
 *     again later (DNS rebinding) meets the same wall. Allowed private hosts
 *     are cloned from the host's network: the namespace could not reach them. */
#include "deploy/deploy.h"
#include "core/netaddr.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- addresses ----------------------------------------------------------- */

/* The classification is core/netaddr.c's, shared with bucket endpoints. */
_Static_assert((int)AH_GIT_ADDR_PUBLIC == (int)AH_ADDR_PUBLIC &&
               (int)AH_GIT_ADDR_PRIVATE == (int)AH_ADDR_PRIVATE &&
               (int)AH_GIT_ADDR_FORBIDDEN == (int)AH_ADDR_FORBIDDEN, "one order");

enum ah_git_addr_kind ah_git_addr_kind(const struct sockaddr *sa)
{
	return (enum ah_git_addr_kind)ah_addr_kind(sa);
}

/* ---- the URL ------------------------------------------------------------- */

static int default_port(const char *url)
{
	if (!strncmp(url, "https://", 8))
		return 443;
	if (!strncmp(url, "http://", 7))
		return 80;
	if (!strncmp(url, "git://", 6))
		return 9418;
	return 22; /* ssh://, ssh+git://, git+ssh://, scp-like */
}

/* Host (into host, size n) and port of a URL. Handles userinfo and [v6]. */
static int url_host(char *host, size_t n, int *port, const char *url)
{
	const char *p = strstr(url, "://");
	bool scp = p == NULL;
	p = p ? p + 3 : url;
	const char *end = p + strcspn(p, "/?#");
	const char *at = memchr(p, '@', (size_t)(end - p));
	if (scp)
		at = memchr(p, '@', strcspn(p, ":"));
	if (at)
		p = at + 1;
	const char *h_end, *rest;
	if (*p == '[') {
		p++;
		h_end = strchr(p, ']');
		rest = h_end ? h_end + 1 : NULL;
	} else {
		h_end = p + strcspn(p, ":/");
		rest = h_end;
	}
	if (!h_end || h_end == p || (size_t)(h_end - p) >= n)
		return AH_EINVALID;
	memcpy(host, p, (size_t)(h_end - p));
	host[h_end - p] = '\0';
	*port = default_port(url);
	if (!scp && *rest == ':' && isdigit((unsigned char)rest[1])) {
		char *e;
		long v = strtol(rest + 1, &e, 10);
		if (v < 1 || v > 65535 || (*e && *e != '/' && *e != '?' && *e != '#'))
			return AH_EINVALID;
		*port = (int)v;
	}
	return 0;
}

static int scheme_check(const char *url, ah_err *err)
{
	static const char *const ok[] = {"https://", "http://", "git://", "ssh://",
	                                 "ssh+git://", "git+ssh://"};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (strncmp(url, ok[i], strlen(ok[i])) == 0)
			return 0;
	const char *colon = strchr(url, ':');
	const char *slash = strchr(url, '/');
	/* scp-like user@host:path; anything else (file://, a path) is local. */
	if (!strstr(url, "://") && colon && colon != url && (!slash || colon < slash))
		return 0;
	return ah_err_set(err, AH_EDENIED, "Repository URL not allowed: \"%.200s\" is not an "
	                  "https://, ssh:// or git:// URL", url);
}

/* ---- git_allow_hosts ----------------------------------------------------- */

/* The entry's host is the URL's: the same text, or the same address however
 * either is spelt (0x7f000001, 2130706433 and ::ffff:127.0.0.1 are 127.0.0.1). */
static bool same_host(const char *h, size_t n, const char *host)
{
	if (n == strlen(host) && strncasecmp(h, host, n) == 0)
		return true;
	char buf[256];
	struct sockaddr_storage x, y;
	if (n >= sizeof(buf))
		return false;
	memcpy(buf, h, n);
	buf[n] = '\0';
	return ah_addr_parse(&x, buf) == AH_ADDR_TEXT_ADDRESS &&
	       ah_addr_parse(&y, host) == AH_ADDR_TEXT_ADDRESS && ah_addr_same(&x, &y);
}

/* One entry, "host", "host:port" or "host:lo-hi" ("[v6]:port" for IPv6). */
static bool entry_matches(const char *e, size_t len, const char *host, int port)
{
	const char *h = e, *h_end;
	if (*e == '[') {
		h = e + 1;
		h_end = memchr(h, ']', len - 1);
		if (!h_end)
			return false;
	} else {
		h_end = memchr(e, ':', len);
		if (!h_end)
			h_end = e + len;
	}
	if (!same_host(h, (size_t)(h_end - h), host))
		return false;
	const char *p = h_end + (*e == '[');
	if (p >= e + len)
		return true; /* any port */
	char buf[16];
	size_t plen = (size_t)(e + len - p);
	if (*p != ':' || plen < 2 || plen >= sizeof(buf))
		return false;
	memcpy(buf, p + 1, plen - 1);
	buf[plen - 1] = '\0';
	char *x;
	long lo = strtol(buf, &x, 10), hi = lo;
	if (*x == '-')
		hi = strtol(x + 1, &x, 10);
	return *x == '\0' && x != buf && lo <= port && port <= hi;
}

bool ah_git_host_allowed(const char *allow_hosts, const char *host, int port)
{
	const char *p = allow_hosts ? allow_hosts : "";
	while (*p) {
		p += strspn(p, ", \t");
		size_t len = strcspn(p, ", \t");
		if (len > 0 && entry_matches(p, len, host, port))
			return true;
		p += len;
	}
	return false;
}

/* ---- the check ----------------------------------------------------------- */

static int denied(ah_err *err, const char *host, const char *what)
{
	return ah_err_set(err, AH_EDENIED, "Repository URL not allowed: host \"%.200s\" is %s",
	                  host, what);
}

/* Every address host resolves to; *any_private set when one is private. */
static int addresses_check(const char *host, bool private_ok, bool *any_private, ah_err *err)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	int g = getaddrinfo(host, NULL, &hints, &res);
	if (g != 0)
		return ah_err_set(err, AH_EFAIL, "Repository clone failed: could not resolve host "
		                  "\"%.200s\"", host);
	int rc = 0;
	for (struct addrinfo *ai = res; ai && rc == 0; ai = ai->ai_next) {
		enum ah_git_addr_kind k = ah_git_addr_kind(ai->ai_addr);
		if (k == AH_GIT_ADDR_FORBIDDEN)
			rc = denied(err, host, "a link-local or cloud metadata address");
		else if (k == AH_GIT_ADDR_PRIVATE && !private_ok)
			rc = denied(err, host, "a loopback, private or reserved address (an "
			            "operator can allow it with git_allow_hosts)");
		*any_private |= k == AH_GIT_ADDR_PRIVATE;
	}
	freeaddrinfo(res);
	return rc;
}

int ah_git_url_check(const char *url, const struct ah_git_opts *opts, bool *host_net,
                     ah_err *err)
{
	char host[256];
	int port;
	*host_net = false;
	if (!url || !*url)
		return ah_err_set(err, AH_EINVALID, "The agent has no git_repo_url");
	int rc = scheme_check(url, err);
	if (rc != 0)
		return rc;
	if (url_host(host, sizeof(host), &port, url) != 0)
		return ah_err_set(err, AH_EDENIED, "Repository URL not allowed: \"%.200s\" has no "
		                  "valid host", url);
	bool listed = ah_git_host_allowed(opts->allow_hosts, host, port);
	bool any_private = false;
	rc = addresses_check(host, listed || opts->allow_private, &any_private, err);
	*host_net = rc == 0 && (listed || (opts->allow_private && any_private));
	return rc;
}

int ah_git_url_host(char *host, size_t n, int *port, const char *url)
{
	return url_host(host, n, port, url);
}
