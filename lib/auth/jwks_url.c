/* Where `jwt_jwks_url` may point. Whoever serves keys at that URL can sign a
 * token for any identity, so a URL any local user could serve is refused:
 * loopback (and 0.0.0.0, ::), link-local and cloud metadata addresses, and a
 * port above 1023 of any of this host's own addresses (no privilege binds
 * those). `jwt_jwks_allow_local = true` is the operator saying only root can
 * serve there (the tests' own identity provider, an IdP on the same host).
 *
 * The API refuses to start with such a URL (ah_jwks_url_check), and every
 * fetch checks the address it actually connects to again (ah_jwks_addr_refused
 * from jwks_cache.c's curl callback), so a name that resolves elsewhere later
 * meets the same rule. */
#include "auth/jwt.h"
#include "core/log.h"
#include "core/netaddr.h"
#include "core/settings.h"

#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

static int port_of(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

const char *ah_jwks_addr_refused(const struct sockaddr *sa)
{
	if (ah_addr_is_loopback(sa))
		return "a loopback address";
	if (ah_addr_kind(sa) == AH_ADDR_FORBIDDEN)
		return "a link-local or cloud metadata address";
	if (port_of(sa) > 1023 && ah_addr_is_own(sa))
		return "a port above 1023 of one of this host's addresses";
	return NULL;
}

/* A port as the URL writes it: digits only, 1 to 65535. */
static bool port_valid(const char *p, size_t n)
{
	long v = 0;
	if (n == 0 || n > 5)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		v = v * 10 + (p[i] - '0');
	}
	return v >= 1 && v <= 65535;
}

/* host (no brackets, no userinfo) and port of an http(s) URL. */
static int split_url(const char *url, char *host, size_t hcap, char port[8])
{
	bool tls = !strncasecmp(url, "https://", 8);
	if (!tls && strncasecmp(url, "http://", 7) != 0)
		return -1;
	const char *p = url + (tls ? 8 : 7);
	size_t auth = strcspn(p, "/?#");
	const char *at = memchr(p, '@', auth);
	if (at) {
		auth -= (size_t)(at + 1 - p);
		p = at + 1;
	}
	const char *h = p, *h_end;
	if (*p == '[') {
		h = p + 1;
		h_end = memchr(h, ']', auth - 1);
	} else {
		h_end = memchr(p, ':', auth);
		h_end = h_end ? h_end : p + auth;
	}
	if (!h_end || h_end == h || (size_t)(h_end - h) >= hcap)
		return -1;
	memcpy(host, h, (size_t)(h_end - h));
	host[h_end - h] = '\0';
	const char *rest = h_end + (*p == '[');
	size_t left = auth - (size_t)(rest - p);
	if (left == 0) {
		snprintf(port, 8, "%s", tls ? "443" : "80");
		return 0;
	}
	if (*rest != ':' || !port_valid(rest + 1, left - 1))
		return -1;
	memcpy(port, rest + 1, left - 1);
	port[left - 1] = '\0';
	return 0;
}

int ah_jwks_url_check(const ah_config *cfg, ah_err *err)
{
	const char *url = ah_set_opt(ah_settings_of(cfg)->jwt.jwks_url);
	char host[256], port[8];
	if (!url || !*url)
		return 0;
	if (split_url(url, host, sizeof host, port) != 0)
		return ah_err_set(err, AH_EINVALID, "jwt_jwks_url should be an http:// or https:// "
		                  "URL with a host (and a port from 1 to 65535)");
	if (ah_settings_of(cfg)->jwt.jwks_allow_local)
		return 0;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res = NULL;
	int g = getaddrinfo(host, port, &hints, &res);
	if (g != 0) {
		/* A provider's name may not resolve at boot; each fetch checks then. */
		ah_log_warn("jwt_jwks_url: cannot resolve %s now (%s); each fetch checks the "
		            "address it connects to", host, gai_strerror(g));
		return 0;
	}
	const char *why = NULL;
	for (struct addrinfo *ai = res; ai && !why; ai = ai->ai_next)
		why = ah_jwks_addr_refused(ai->ai_addr);
	freeaddrinfo(res);
	if (why)
		return ah_err_set(err, AH_EINVALID, "jwt_jwks_url: %s port %s is %s, where any local "
		                  "user could serve keys and log in as anyone; use the identity "
		                  "provider's own URL, or set jwt_jwks_allow_local = true if only "
		                  "root can listen there", host, port, why);
	return 0;
}
