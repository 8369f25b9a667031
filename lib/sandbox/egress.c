/* Egress allow-lists (issue 32): a sandbox whose spec carries an allow-list
 * reaches only the listed networks and the addresses its listed names had
 * when it was made; anything else is refused at once (a TCP reset, an ICMP
 * admin-prohibited), never dropped into a timeout.
 *
 * The rules live in the sandbox's own network namespace: an nft table
 * "inet egress" on its output hook, with the allowed addresses in two sets
 * (networks with any port; address . port pairs). The namespace belongs to
 * the host's user namespace, so the agent cannot change them, and a runner
 * that recreates the host-wide table "inet agenthost" (net.c) leaves them
 * alone. Loopback (the model gateway's listener, net.c) is always allowed.
 *
 * Names are resolved here, by the runner's resolver, when the sandbox is
 * claimed; the answers are pinned for the sandbox's life: they are what the
 * set holds, and they are the sandbox's /etc/hosts, while its resolv.conf
 * points at its own loopback, where nothing answers: a name that is not on
 * the list does not resolve, at once. Answers in refused ranges are left out.
 *
 * Private ranges are refused first, unless the operator allows them
 * (egress_allow_private); the host table drops them for every sandbox, so a
 * slot whose list opens one is put in its set "private_ok" (net.c).
 *
 * A slot's namespace outlives its sandbox (net.c): the next sandbox of the
 * slot starts with the rules reset (sb_egress_reset, at the network step). */
#include "sandbox/internal.h"
#include "sandbox/sandbox.h"

#include "core/log.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOSTS_MAX 60000      /* the keeper's buffer holds 64 KiB */
#define ADDRS_PER_NAME 8
#define SCRIPT_MAX (64 * 1024)

static const char PRIVATE[] = "0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 172.16.0.0/12, "
                              "192.0.0.0/24, 192.168.0.0/16, 198.18.0.0/15, 224.0.0.0/3";
static const char RESOLV[] = "nameserver 127.0.0.1\noptions attempts:1 timeout:1\n";

typedef struct egress_build {
	char nets[SCRIPT_MAX / 2], ports[SCRIPT_MAX / 2], hosts[HOSTS_MAX];
	size_t nnets, nports, nhosts;
	bool overflow, opens_private;
} egress_build;

static void add(char *buf, size_t cap, size_t *off, bool *overflow, const char *s)
{
	size_t n = strlen(s);
	if (*off + n + 1 > cap) {
		*overflow = true;
		return;
	}
	memcpy(buf + *off, s, n + 1);
	*off += n;
}

/* One allowed network (host order) with its port (0: any). */
static void allow_net(egress_build *b, uint32_t addr, int bits, int port)
{
	struct in_addr a = { htonl(addr) };
	char s[INET_ADDRSTRLEN], e[64];
	inet_ntop(AF_INET, &a, s, sizeof s);
	if (port)
		snprintf(e, sizeof e, "%s%s/%d . %d", b->nports ? ", " : "", s, bits, port);
	else
		snprintf(e, sizeof e, "%s%s/%d", b->nnets ? ", " : "", s, bits);
	if (port)
		add(b->ports, sizeof b->ports, &b->nports, &b->overflow, e);
	else
		add(b->nets, sizeof b->nets, &b->nnets, &b->overflow, e);
}

/* False when the range may not be opened: link-local always, private
 * without the operator's setting. */
static bool range_ok(egress_build *b, uint32_t addr, int bits)
{
	if (ah_egress_net_forbidden(addr, bits))
		return false;
	if (ah_egress_net_private(addr, bits)) {
		if (!sb_g.egress_private)
			return false;
		b->opens_private = true;
	}
	return true;
}

/* A name's IPv4 addresses now, pinned: into the set and /etc/hosts. */
static void allow_name(egress_build *b, const ah_egress_entry *e)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
	int rc = getaddrinfo(e->name, NULL, &hints, &res);
	if (rc != 0) {
		ah_log_warn("sandbox egress: %s does not resolve: %s", e->name, gai_strerror(rc));
		return;
	}
	int n = 0;
	for (struct addrinfo *i = res; i && n < ADDRS_PER_NAME; i = i->ai_next, n++) {
		uint32_t a = ntohl(((struct sockaddr_in *)i->ai_addr)->sin_addr.s_addr);
		char s[INET_ADDRSTRLEN], line[AH_EGRESS_MAX_NAME + 24];
		inet_ntop(AF_INET, &((struct sockaddr_in *)i->ai_addr)->sin_addr, s, sizeof s);
		if (!range_ok(b, a, 32)) {
			ah_log_warn("sandbox egress: %s is %s, a refused range: left out", e->name, s);
			continue;
		}
		allow_net(b, a, 32, e->port);
		snprintf(line, sizeof line, "%s %s\n", s, e->name);
		if (!strstr(b->hosts, line))
			add(b->hosts, sizeof b->hosts, &b->nhosts, &b->overflow, line);
	}
	freeaddrinfo(res);
}

static int script_of(char *s, size_t cap, const egress_build *b)
{
	int n = snprintf(s, cap,
		"table inet egress\ndelete table inet egress\ntable inet egress {\n"
		"  set nets { type ipv4_addr; flags interval; auto-merge; %s%s%s }\n"
		"  set ports { type ipv4_addr . inet_service; flags interval; %s%s%s }\n"
		"  chain out {\n    type filter hook output priority filter; policy accept;\n"
		"    oif \"lo\" accept\n"
		"    ip daddr 169.254.0.0/16 goto refuse\n"
		"    %s%s%s\n"
		"    ip daddr @nets counter accept\n"
		"    ip daddr . tcp dport @ports counter accept\n"
		"    ip daddr . udp dport @ports accept\n"
		"    counter goto refuse\n  }\n"
		"  chain refuse {\n    meta l4proto tcp reject with tcp reset\n"
		"    reject with icmpx type admin-prohibited\n  }\n}\n",
		b->nnets ? "elements = { " : "", b->nets, b->nnets ? " }" : "",
		b->nports ? "elements = { " : "", b->ports, b->nports ? " }" : "",
		sb_g.egress_private ? "" : "ip daddr { ", sb_g.egress_private ? "" : PRIVATE,
		sb_g.egress_private ? "" : " } goto refuse");
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* The sandbox's /etc/hosts and resolv.conf, written by its keeper. */
static int send_etc(ah_sandbox *sb, const egress_build *b, ah_err *err)
{
	static const char BASE[] = "127.0.0.1 localhost sandbox\n::1 localhost\n";
	size_t hl = strlen(BASE) + b->nhosts, rl = sizeof RESOLV;
	char *body = malloc(hl + 1 + rl);
	if (!body)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	memcpy(body, BASE, strlen(BASE));
	memcpy(body + strlen(BASE), b->hosts, b->nhosts);
	body[hl] = '\0';
	memcpy(body + hl + 1, RESOLV, rl);
	sb_msg m = { .op = SB_ETC_NET };
	int rc = sb_send(sb->ctl_fd, &m, body, hl + 1 + rl, NULL, 0) < 0
	         ? sb_keeper_died(sb, err)
	         : sb_keeper_reply(sb, SB_OK, 10000, err);
	free(body);
	return rc;
}

static int build(egress_build *b, const ah_sandbox_egress *eg, ah_err *err)
{
	for (size_t i = 0; i < eg->n; i++) {
		const ah_egress_entry *e = &eg->entries[i];
		if (e->is_name)
			allow_name(b, e);
		else if (range_ok(b, e->addr, e->bits))
			allow_net(b, e->addr, e->bits, e->port);
	}
	return b->overflow ? ah_err_set(err, AH_EINVALID, "the allow-list is too long") : 0;
}

int sb_egress_claim(ah_sandbox *sb, const ah_sandbox_egress *eg, ah_err *err)
{
	if (!eg)
		return 0;
	sb_slot *slot = sb_slot_of(sb);
	egress_build *b = calloc(1, sizeof *b);
	char *script = malloc(SCRIPT_MAX + 4096);
	int rc = !b || !script ? ah_err_set(err, AH_EFAIL, "out of memory") : build(b, eg, err);
	if (rc == 0 && script_of(script, SCRIPT_MAX + 4096, b) < 0)
		rc = ah_err_set(err, AH_EINVALID, "the allow-list is too long");
	slot->egress = true; /* from the first try on: a half-made state is reset */
	if (rc == 0 && sb_net_nft(slot->netns, script) < 0)
		rc = ah_err_set(err, AH_EFAIL, "nft failed to install the sandbox's allow-list");
	if (rc == 0 && b->opens_private) {
		slot->private_ok = true;
		if (sb_net_private_ok(sb->plan.veth, true) < 0)
			rc = ah_err_set(err, AH_EFAIL, "nft failed to open private ranges for %s", sb->plan.veth);
	}
	if (rc == 0)
		rc = send_etc(sb, b, err);
	free(script);
	free(b);
	return rc;
}

void sb_egress_reset(ah_sandbox *sb)
{
	sb_slot *slot = sb_slot_of(sb);
	/* Rules that cannot be removed go with their namespace: the next
	 * sandbox of the slot gets a new one. */
	if (slot->egress && slot->netns >= 0 &&
	    sb_net_nft(slot->netns, "table inet egress\ndelete table inet egress\n") < 0) {
		ah_log_error("sandbox: could not remove the allow-list of %s: new namespace", sb->plan.veth);
		sb_net_slot_drop(&sb->plan, &slot->netns);
	}
	if (slot->private_ok)
		sb_net_private_ok(sb->plan.veth, false);
	slot->egress = slot->private_ok = false;
}
