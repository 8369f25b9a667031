/* Unit test of the git URL policy (lib/deploy/git_url.c), printed as TAP:
 * which addresses are public, private or forbidden whatever the configuration
 * (link-local, cloud metadata, in every spelling), which host:port entries
 * git_allow_hosts lets through, and what ah_git_url_check decides for literal
 * addresses (no DNS): refused with "Repository URL not allowed", or allowed
 * and cloned from the host's network or from the isolated one. */
#include "deploy/deploy.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "tap.h"

#define PUB AH_GIT_ADDR_PUBLIC
#define PRIV AH_GIT_ADDR_PRIVATE
#define FORB AH_GIT_ADDR_FORBIDDEN

static const struct { const char *addr; enum ah_git_addr_kind kind; } addrs[] = {
	{"169.254.169.254", FORB}, {"169.254.0.1", FORB}, {"100.100.100.200", FORB},
	{"fe80::1", FORB}, {"febf::1", FORB}, {"fd00:ec2::254", FORB},
	{"::ffff:169.254.169.254", FORB}, {"::169.254.169.254", FORB},
	{"64:ff9b::a9fe:a9fe", FORB},
	{"127.0.0.1", PRIV}, {"127.1.2.3", PRIV}, {"0.0.0.0", PRIV}, {"10.1.2.3", PRIV},
	{"172.16.0.1", PRIV}, {"192.168.1.1", PRIV}, {"100.64.0.1", PRIV}, {"224.0.0.1", PRIV},
	{"::1", PRIV}, {"::", PRIV}, {"::ffff:127.0.0.1", PRIV}, {"::ffff:10.0.0.1", PRIV},
	{"fd12::1", PRIV}, {"fec0::1", PRIV}, {"ff02::1", PRIV}, {"2001:db8::1", PRIV},
	{"64:ff9b::808:808", PRIV},
	{"8.8.8.8", PUB}, {"140.82.112.3", PUB}, {"100.128.0.1", PUB}, {"169.253.255.255", PUB},
	{"::ffff:8.8.8.8", PUB}, {"2606:4700::1111", PUB}, {"fe7f::1", PUB},
};

static const struct { const char *list, *host; int port, allowed; } allow[] = {
	{"127.0.0.1:18400-18419", "127.0.0.1", 18400, 1},
	{"127.0.0.1:18400-18419", "127.0.0.1", 18419, 1},
	{"127.0.0.1:18400-18419", "127.0.0.1", 18420, 0},
	{"127.0.0.1:18400-18419", "127.0.0.1", 8080, 0},
	{"127.0.0.1:18400-18419", "localhost", 18400, 0},
	{"127.0.0.1:18400-18419", "127.0.0.10", 18400, 0},
	{"git.corp:443, 127.0.0.1:9418", "127.0.0.1", 9418, 1},
	{"git.corp:443 127.0.0.1:9418", "GIT.corp", 443, 1},
	{"git.corp:443", "git.corp", 22, 0},
	{"git.corp", "git.corp", 22, 1},
	{"[::1]:9418", "::1", 9418, 1},
	{"[::1]:9418", "::1", 9419, 0},
	{"127.0.0.1:x", "127.0.0.1", 1, 0},
	{"", "127.0.0.1", 80, 0},
	{NULL, "127.0.0.1", 80, 0},
};

enum { DENIED, ISOLATED, HOST };
#define ALLOW "127.0.0.1:18400-18419"
static const struct { const char *url, *allow_hosts; int allow_private, outcome; } checks[] = {
	{"http://169.254.169.254/x.git", "", 0, DENIED},
	{"http://169.254.169.254/x.git", "169.254.169.254", 1, DENIED},
	{"http://[::ffff:169.254.169.254]/x.git", "", 1, DENIED},
	{"https://[fe80::1]/x.git", "", 1, DENIED},
	{"http://127.0.0.1:8080/x.git", ALLOW, 0, DENIED},
	{"git://127.0.0.1/x", ALLOW, 0, DENIED},                /* 9418: not in the range */
	{"git://127.0.0.1:18400/x", ALLOW, 0, HOST},
	{"git://user@127.0.0.1:18419/x", ALLOW, 0, HOST},
	{"http://[::1]:18400/x.git", ALLOW, 0, DENIED},
	{"http://127.0.0.1:8080/x.git", "", 1, HOST},           /* development only */
	{"http://10.0.0.1/x.git", "", 0, DENIED},
	{"https://8.8.8.8/x.git", "", 0, ISOLATED},
	{"https://8.8.8.8/x.git", "8.8.8.8", 0, HOST},
	{"git@8.8.8.8:x.git", "", 0, ISOLATED},
	{"file:///etc", "", 1, DENIED},
	{"/srv/git/repo", "", 1, DENIED},
	/* The metadata address spelt otherwise is that address. */
	{"http://0251.0376.0251.0376/x.git", "", 1, DENIED},
	{"http://2852039166/x.git", "", 1, DENIED},
	{"http://0xa9fea9fe/x.git", "", 1, DENIED},
	{"http://169.254.43518/x.git", "0251.0376.0251.0376", 1, DENIED},
	{"http://[::ffff:a9fe:a9fe]/x.git", "", 1, DENIED},
	/* A listed address matches in any spelling; an unlisted port does not. */
	{"git://0x7f000001:18400/x", ALLOW, 0, HOST},
	{"git://2130706433:18419/x", ALLOW, 0, HOST},
	{"git://017700000001:18420/x", ALLOW, 0, DENIED},
	{"http://[::ffff:127.0.0.1]:18400/x.git", ALLOW, 0, HOST},
	{"git://2130706433:18400/x", "", 0, DENIED},
};

static int to_sockaddr(struct sockaddr_storage *ss, const char *s)
{
	memset(ss, 0, sizeof(*ss));
	struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, s, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		return 0;
	}
	v6->sin6_family = AF_INET6;
	return inet_pton(AF_INET6, s, &v6->sin6_addr) == 1 ? 0 : -1;
}

int main(void)
{
	static const char *const kinds[] = {"public", "private", "forbidden"};
	for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		struct sockaddr_storage ss;
		int parsed = to_sockaddr(&ss, addrs[i].addr) == 0;
		ok(parsed && ah_git_addr_kind((struct sockaddr *)&ss) == addrs[i].kind,
		   "%s is %s", addrs[i].addr, kinds[addrs[i].kind]);
	}
	for (size_t i = 0; i < sizeof(allow) / sizeof(allow[0]); i++)
		ok(ah_git_host_allowed(allow[i].list, allow[i].host, allow[i].port) == allow[i].allowed,
		   "\"%s\" %s %s port %d", allow[i].list ? allow[i].list : "(null)",
		   allow[i].allowed ? "allows" : "does not allow", allow[i].host, allow[i].port);
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		struct ah_git_opts o = {.allow_hosts = checks[i].allow_hosts,
		                        .allow_private = checks[i].allow_private};
		ah_err err = {0};
		bool host_net = true;
		int rc = ah_git_url_check(checks[i].url, &o, &host_net, &err);
		int outcome = rc != 0 ? DENIED : host_net ? HOST : ISOLATED;
		bool msg_ok = rc == 0 || (rc == AH_EDENIED &&
		              strncmp(err.msg, "Repository URL not allowed: ", 28) == 0);
		ok(outcome == checks[i].outcome && msg_ok, "%s (allow \"%s\"%s): %s%s%s",
		   checks[i].url, checks[i].allow_hosts, checks[i].allow_private ? ", private" : "",
		   (const char *[]){"refused", "isolated", "host network"}[checks[i].outcome],
		   rc ? ": " : "", rc ? err.msg : "");
	}
	return tap_done();
}
