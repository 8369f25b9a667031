/* Endpoint, name and credential shape checks: see buckets.h. */
#include "buckets/buckets.h"
#include "core/config.h"
#include "core/netaddr.h"
#include "core/util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *const ah_provider_names[] = {"s3", "gcs", "r2", NULL};

static int bad(ah_err *err, const char *why)
{
	return ah_err_set(err, AH_EINVALID, "%s", why);
}

/* Host of an http(s) URL after the scheme: [v6] or up to ':' '/' or end. */
static int split_host(char *host, size_t n, const char *p, const char **rest)
{
	const char *end;
	if (*p == '[') {
		end = strchr(++p, ']');
		*rest = end ? end + 1 : NULL;
	} else {
		end = p + strcspn(p, ":/");
		*rest = end;
	}
	if (!end || end == p || (size_t)(end - p) >= n)
		return AH_EINVALID;
	memcpy(host, p, (size_t)(end - p));
	host[end - p] = '\0';
	return 0;
}

/* The port after host, if any, into *port (left as it is when none). */
static int port_check(const char *rest, long *port)
{
	if (*rest != ':')
		return 0;
	char *e;
	long v = strtol(rest + 1, &e, 10);
	*port = v;
	return (e == rest + 1 || v < 1 || v > 65535 || (*e && *e != '/')) ? AH_EINVALID : 0;
}

static int default_port(const char *url)
{
	return strncasecmp(url, "https://", 8) == 0 ? 443 : 80;
}


int ah_bucket_endpoint_check(const char *url, const ah_addr_policy *pol, bool path_ok,
                             ah_err *err)
{
	const char *p;
	if (!strncasecmp(url, "https://", 8))
		p = url + 8;
	else if (!strncasecmp(url, "http://", 7))
		p = url + 7;
	else
		return bad(err, "URL should start with https:// or http://");
	for (const char *c = url; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f || *c == '\\')
			return bad(err, "URL should not contain spaces, control characters or backslashes");
	size_t auth = strcspn(p, "/?#");
	if (memchr(p, '@', auth))
		return bad(err, "URL should not contain credentials; set them with "
		           "POST /buckets/{slug}/credentials");
	if (strpbrk(p, "?#"))
		return bad(err, "URL should not have a query or fragment");
	char host[256];
	const char *rest;
	long port = default_port(url);
	if (split_host(host, sizeof(host), p, &rest) != 0 || port_check(rest, &port) != 0)
		return bad(err, "URL should name a host (and a port from 1 to 65535)");
	const char *path = rest + strcspn(rest, "/");
	if (!path_ok && *path && strcmp(path, "/") != 0)
		return bad(err, "URL should be scheme://host[:port] without a path (buckets are named "
		           "by bucket_name)");
	int kind = ah_addr_host_kind(host, *p == '[', port, pol);
	if (kind == -2)
		return bad(err, "URL's host is neither a name nor a valid IP address (a number "
		           "as the last label must be a whole IPv4 address)");
	if (kind == AH_ADDR_FORBIDDEN)
		return bad(err, "URL names a link-local or cloud metadata address, which is never allowed");
	if (kind == AH_ADDR_PRIVATE)
		return bad(err, "URL names a loopback, private or CGNAT address; endpoints must be "
		           "outside addresses (an operator can allow private ones with "
		           "storage_allow_hosts)");
	return 0;
}

ah_addr_policy ah_bucket_policy(const struct ah_config *cfg)
{
	const ah_buckets_settings *set = &ah_settings_of(cfg)->buckets;
	return (ah_addr_policy){.allow_private = set->allow_private, .allow_hosts = set->allow_hosts};
}

bool ah_bucket_name_valid(const char *s)
{
	size_t n = strlen(s);
	if (n < 3 || n > 222 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || strchr("._-", s[i])))
			return false;
	return !strstr(s, "..");
}

bool ah_bucket_region_valid(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}
