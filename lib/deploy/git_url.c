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

#include <arpa/inet.h>
#include <ctype.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- addresses ----------------------------------------------------------- */

static bool v4_in(uint32_t a, uint32_t net, int bits)
{
	return (a >> (32 - bits)) == (net >> (32 - bits));
}

/* Link-local (169.254/16: AWS, GCP, Azure metadata at 169.254.169.254) and
 * Alibaba's metadata address. */
static bool v4_forbidden(uint32_t a)
{
	return v4_in(a, 0xA9FE0000, 16) || a == 0x646464C8;
}

static bool v4_private(uint32_t a)
{
	static const struct { uint32_t net; int bits; } nets[] = {
		{0x00000000, 8}, {0x0A000000, 8}, {0x64400000, 10}, {0x7F000000, 8},
		{0xAC100000, 12}, {0xC0000000, 24}, {0xC0000200, 24},
		{0xC0A80000, 16}, {0xC6120000, 15}, {0xC6336400, 24}, {0xCB007100, 24},
		{0xE0000000, 4}, {0xF0000000, 4},
	};
	for (size_t i = 0; i < sizeof(nets) / sizeof(nets[0]); i++)
		if (v4_in(a, nets[i].net, nets[i].bits))
			return true;
	return false;
}

static enum ah_git_addr_kind v4_kind(uint32_t a)
{
	if (v4_forbidden(a))
		return AH_GIT_ADDR_FORBIDDEN;
	return v4_private(a) ? AH_GIT_ADDR_PRIVATE : AH_GIT_ADDR_PUBLIC;
}

static enum ah_git_addr_kind v6_kind(const unsigned char *b)
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const unsigned char zero[12] = {0};
	static const unsigned char nat64[12] = {0, 0x64, 0xff, 0x9b};
	static const unsigned char aws[16] = {0xfd, 0, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54};
	uint32_t v4 = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
	/* v4-mapped and v4-compatible (and ::, ::1 among them): the v4 address is
	 * what is reached. */
	if (memcmp(b, mapped, 12) == 0 || memcmp(b, zero, 12) == 0)
		return v4 <= 1 ? AH_GIT_ADDR_PRIVATE : v4_kind(v4);
	if (memcmp(b, nat64, 12) == 0) /* a translator's, towards v4 */
		return v4_forbidden(v4) ? AH_GIT_ADDR_FORBIDDEN : AH_GIT_ADDR_PRIVATE;
	if ((b[0] == 0xfe && (b[1] & 0xc0) == 0x80) || memcmp(b, aws, 16) == 0)
		return AH_GIT_ADDR_FORBIDDEN;             /* fe80::/10, AWS fd00:ec2::254 */
	if ((b[0] & 0xfe) == 0xfc ||                  /* fc00::/7 unique local */
	    (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) ||  /* fec0::/10 site-local */
	    b[0] == 0xff ||                           /* multicast */
	    (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8))
		return AH_GIT_ADDR_PRIVATE;
	return AH_GIT_ADDR_PUBLIC;
}

enum ah_git_addr_kind ah_git_addr_kind(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return v4_kind(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
	if (sa->sa_family == AF_INET6)
		return v6_kind(((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr);
	return AH_GIT_ADDR_FORBIDDEN;
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
	if ((size_t)(h_end - h) != strlen(host) || strncasecmp(h, host, (size_t)(h_end - h)) != 0)
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
