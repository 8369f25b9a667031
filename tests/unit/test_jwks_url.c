/* Where jwt_jwks_url may point (lib/auth/jwks_url.c): one row per URL, with
 * and without jwt_jwks_allow_local, and whether the API would start. Only
 * literal addresses and localhost, so no row needs DNS. TAP. */
#include "auth/jwt.h"
#include "tap.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ah_jwks_url_check on a configuration of url (and the allowance); the
 * error message in msg. */
static int check(const char *url, bool allow, char *msg, size_t n)
{
	char path[] = "/tmp/ah-test-jwks-url-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	fprintf(f, "jwt_jwks_url = %s\njwt_jwks_allow_local = %s\n", url, allow ? "true" : "false");
	fclose(f);
	ah_config *c = NULL;
	ah_err err = {0};
	int rc = ah_config_load(&c, path, &err);
	if (rc == 0)
		rc = ah_jwks_url_check(c, &err);
	snprintf(msg, n, "%s", err.msg);
	ah_config_free(c);
	unlink(path);
	return rc;
}

static const struct row {
	const char *url;
	const char *refused; /* in the message; NULL: the API starts */
} rows[] = {
	{"https://93.184.216.34/.well-known/jwks.json", NULL},
	{"https://93.184.216.34:8443/jwks.json", NULL},
	{"http://127.0.0.1:18399/jwks.json", "loopback"},
	{"http://127.0.0.1/jwks.json", "loopback"},
	{"http://127.8.9.10:443/jwks.json", "loopback"},
	{"https://localhost/jwks.json", "loopback"},
	{"http://[::1]:8080/jwks.json", "loopback"},
	{"http://[::ffff:127.0.0.1]/jwks.json", "loopback"},
	{"http://0.0.0.0:8080/jwks.json", "loopback"},
	{"http://[::]/jwks.json", "loopback"},
	{"http://evil@127.0.0.1:9999/jwks.json", "loopback"},
	{"http://169.254.169.254/latest/jwks", "link-local"},
	{"http://[fe80::1]:443/jwks", "link-local"},
	{"ftp://93.184.216.34/jwks.json", "http:// or https://"},
	{"http://127.0.0.1:99999/jwks.json", "a port from 1 to 65535"},
	{"http://127.0.0.1:/jwks.json", "a port from 1 to 65535"},
	{"http:///jwks.json", "with a host"},
	{"https://[::1/jwks.json", "with a host"},
};

static void test_rows(void)
{
	char msg[512];
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		const struct row *r = &rows[i];
		int rc = check(r->url, false, msg, sizeof msg);
		if (!r->refused) {
			ok(rc == 0, "%s: the API starts (%s)", r->url, msg);
			continue;
		}
		ok(rc == AH_EINVALID && strstr(msg, "jwt_jwks_url") && strstr(msg, r->refused),
		   "%s: refused, naming jwt_jwks_url and \"%s\" (%s)", r->url, r->refused, msg);
		bool malformed = !strstr(r->refused, "loopback") && !strstr(r->refused, "link-local");
		rc = check(r->url, true, msg, sizeof msg);
		ok(malformed ? rc != 0 : rc == 0, "%s with jwt_jwks_allow_local: %s (%s)", r->url,
		   malformed ? "still refused" : "taken", msg);
	}
	ok(check("", false, msg, sizeof msg) == 0, "no jwt_jwks_url: nothing to check");
	ok(check("http://127.0.0.1:1/x", false, msg, sizeof msg) == AH_EINVALID &&
	   strstr(msg, "jwt_jwks_allow_local = true"), "the message names the allowance (%s)", msg);
}

/* This host's own non-loopback IPv4 address: any local user may bind its
 * ports above 1023, none below. */
static void test_own_address(void)
{
	struct ifaddrs *ifs = NULL;
	char host[INET_ADDRSTRLEN] = "", url[128], msg[512];
	if (getifaddrs(&ifs) == 0)
		for (struct ifaddrs *i = ifs; i && !*host; i = i->ifa_next) {
			struct sockaddr_in *a = (struct sockaddr_in *)i->ifa_addr;
			if (a && a->sin_family == AF_INET && (ntohl(a->sin_addr.s_addr) >> 24) != 127)
				inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
		}
	freeifaddrs(ifs);
	if (!*host) {
		ok(1, "# SKIP this host has no non-loopback IPv4 address");
		return;
	}
	snprintf(url, sizeof url, "http://%s:8443/jwks.json", host);
	ok(check(url, false, msg, sizeof msg) == AH_EINVALID && strstr(msg, "above 1023"),
	   "%s: this host's address above port 1023 is refused (%s)", url, msg);
	ok(check(url, true, msg, sizeof msg) == 0, "%s: taken with jwt_jwks_allow_local", url);
	snprintf(url, sizeof url, "https://%s/jwks.json", host);
	ok(check(url, false, msg, sizeof msg) == 0, "%s: port 443 of this host is root's (%s)", url, msg);
}

int main(void)
{
	/* scripts/test exports the test stacks' JWKS settings: not these tests'. */
	unsetenv("AGENTHOST_JWT_JWKS_URL");
	unsetenv("AGENTHOST_JWT_JWKS_ALLOW_LOCAL");
	test_rows();
	test_own_address();
	return tap_done();
}
