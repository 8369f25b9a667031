/* Network: each sandbox has its own network namespace joined to the host by a
 * veth pair (host side "ahs<slot>", sandbox side "eth0", a /30 from
 * sandbox_net), and reaches the outside only through NAT.
 *
 * The policy is one nft table, "inet agenthost", created at init and deleted at
 * shutdown; nothing else in the ruleset is touched. Traffic from a sandbox to
 * the host itself (any of its addresses: it arrives on the input hook) is
 * dropped; forwarded traffic may go to the configured DNS resolvers on port 53,
 * and to anything that is not loopback, private (10/8, 172.16/12,
 * 192.168/16, 100.64/10), link-local (169.254/16: cloud metadata), multicast,
 * reserved, or on one of the host's own subnets; new connections towards a
 * sandbox are dropped. IPv6 is off inside and dropped at the veth. The runner
 * socket is a unix socket in the host's filesystem and so invisible anyway.
 *
 * Links and addresses are configured with rtnetlink directly (the keeper does
 * its side from inside the namespace, where it must not malloc). */
#include "sandbox/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

/* ---- a tiny rtnetlink message builder (stack only) ---- */

typedef struct nlbuf {
	union { struct nlmsghdr h; char b[1024]; } u;
} nlbuf;

static void *nl_tail(nlbuf *m)
{
	return m->u.b + NLMSG_ALIGN(m->u.h.nlmsg_len);
}

static void nl_start(nlbuf *m, int type, int flags, const void *hdr, size_t hlen)
{
	memset(m, 0, sizeof *m);
	m->u.h.nlmsg_type = (unsigned short)type;
	m->u.h.nlmsg_flags = (unsigned short)(NLM_F_REQUEST | NLM_F_ACK | flags);
	m->u.h.nlmsg_len = NLMSG_LENGTH(hlen);
	memcpy(NLMSG_DATA(&m->u.h), hdr, hlen);
}

static struct rtattr *nl_attr(nlbuf *m, int type, const void *data, size_t len)
{
	struct rtattr *a = nl_tail(m);
	a->rta_type = (unsigned short)type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	if (len)
		memcpy(RTA_DATA(a), data, len);
	m->u.h.nlmsg_len = NLMSG_ALIGN(m->u.h.nlmsg_len) + RTA_ALIGN(a->rta_len);
	return a;
}

static void nl_raw(nlbuf *m, const void *data, size_t len)
{
	memcpy(nl_tail(m), data, len);
	m->u.h.nlmsg_len = NLMSG_ALIGN(m->u.h.nlmsg_len) + (unsigned)NLMSG_ALIGN(len);
}

static void nl_end(nlbuf *m, struct rtattr *nest)
{
	nest->rta_len = (unsigned short)((char *)nl_tail(m) - (char *)nest);
}

/* Sends one request and waits for its ack; 0 or -1 with errno. */
static int nl_talk(nlbuf *m)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -1;
	char ack[512];
	int rc = -1;
	if (send(fd, m->u.b, m->u.h.nlmsg_len, 0) < 0)
		goto done;
	ssize_t n = recv(fd, ack, sizeof ack, 0);
	struct nlmsghdr *h = (struct nlmsghdr *)ack;
	if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)) || h->nlmsg_type != NLMSG_ERROR) {
		errno = EPROTO;
		goto done;
	}
	int e = ((struct nlmsgerr *)NLMSG_DATA(h))->error;
	if (e == 0)
		rc = 0;
	else
		errno = -e;
done:;
	int se = errno;
	close(fd);
	errno = se;
	return rc;
}

static int link_up(int idx)
{
	nlbuf m;
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = idx,
	                         .ifi_flags = IFF_UP, .ifi_change = IFF_UP };
	nl_start(&m, RTM_NEWLINK, 0, &ifi, sizeof ifi);
	return nl_talk(&m);
}

static int add_addr(int idx, uint32_t ip)
{
	nlbuf m;
	struct ifaddrmsg ifa = { .ifa_family = AF_INET, .ifa_prefixlen = 30,
	                         .ifa_scope = RT_SCOPE_UNIVERSE, .ifa_index = (unsigned)idx };
	nl_start(&m, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &ifa, sizeof ifa);
	nl_attr(&m, IFA_LOCAL, &ip, 4);
	nl_attr(&m, IFA_ADDRESS, &ip, 4);
	return nl_talk(&m);
}

static int add_default_route(int idx, uint32_t gw)
{
	nlbuf m;
	struct rtmsg rt = { .rtm_family = AF_INET, .rtm_table = RT_TABLE_MAIN,
	                    .rtm_protocol = RTPROT_BOOT, .rtm_scope = RT_SCOPE_UNIVERSE,
	                    .rtm_type = RTN_UNICAST };
	nl_start(&m, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, &rt, sizeof rt);
	nl_attr(&m, RTA_GATEWAY, &gw, 4);
	nl_attr(&m, RTA_OIF, &idx, 4);
	return nl_talk(&m);
}

static int create_veth(const char *host, pid_t peer_pid)
{
	nlbuf m;
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	nl_start(&m, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &ifi, sizeof ifi);
	nl_attr(&m, IFLA_IFNAME, host, strlen(host) + 1);
	struct rtattr *info = nl_attr(&m, IFLA_LINKINFO, NULL, 0);
	nl_attr(&m, IFLA_INFO_KIND, "veth", 4);
	struct rtattr *data = nl_attr(&m, IFLA_INFO_DATA, NULL, 0);
	struct rtattr *peer = nl_attr(&m, VETH_INFO_PEER, NULL, 0);
	nl_raw(&m, &ifi, sizeof ifi);
	nl_attr(&m, IFLA_IFNAME, "eth0", 5);
	uint32_t pid = (uint32_t)peer_pid;
	nl_attr(&m, IFLA_NET_NS_PID, &pid, 4);
	nl_end(&m, peer);
	nl_end(&m, data);
	nl_end(&m, info);
	return nl_talk(&m);
}

static int delete_link(const char *name)
{
	nlbuf m;
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	nl_start(&m, RTM_DELLINK, 0, &ifi, sizeof ifi);
	nl_attr(&m, IFLA_IFNAME, name, strlen(name) + 1);
	return nl_talk(&m);
}

static void disable_ipv6(const char *ifname)
{
	char path[128];
	snprintf(path, sizeof path, "/proc/sys/net/ipv6/conf/%s/disable_ipv6", ifname);
	sb_write_file(path, "1");
}

/* ---- per sandbox ---- */

/* A dead sandbox's veth disappears asynchronously with its namespace. */
static void wait_gone(const char *name)
{
	for (int i = 0; i < 200 && if_nametoindex(name) > 0; i++)
		usleep(5000);
}

int sb_net_host_setup(const sb_plan *p, pid_t keeper, ah_err *err)
{
	int rc = create_veth(p->veth, keeper);
	if (rc < 0 && errno == EEXIST) {
		delete_link(p->veth); /* left by a crashed run */
		wait_gone(p->veth);
		rc = create_veth(p->veth, keeper);
	}
	if (rc < 0)
		return ah_err_set(err, AH_EFAIL, "create veth %s: %s", p->veth, strerror(errno));
	int idx = (int)if_nametoindex(p->veth);
	disable_ipv6(p->veth);
	if (idx <= 0 || add_addr(idx, p->host_ip) < 0 || link_up(idx) < 0)
		return ah_err_set(err, AH_EFAIL, "configure %s: %s", p->veth, strerror(errno));
	return 0;
}

/* Deleting one end deletes the pair; done explicitly because the kernel
 * tears down a dead namespace's devices asynchronously. */
void sb_net_host_teardown(const sb_plan *p)
{
	delete_link(p->veth);
	wait_gone(p->veth); /* before the slot (and so the name) is reused */
}

#define STEP(expr, name) do { *what = (name); if ((expr) < 0) return -1; } while (0)

int sb_net_inside_setup(const sb_plan *p, const char **what)
{
	/* /proc/sys/net shows the opener's namespace: these are the sandbox's. */
	disable_ipv6("all");
	disable_ipv6("default");
	disable_ipv6("eth0");
	STEP(link_up(1), "loopback up"); /* lo is always ifindex 1 in a new netns */
	int idx = (int)if_nametoindex("eth0");
	STEP(idx > 0 ? 0 : -1, "find eth0");
	STEP(add_addr(idx, p->sb_ip), "address eth0");
	STEP(link_up(idx), "eth0 up");
	STEP(add_default_route(idx, p->host_ip), "default route");
	return 0;
}

/* ---- the policy ---- */

static int run_nft(const char *script)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	char *argv[] = { "nft", "-f", "-", NULL };
	char *envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[0], 0);
	pid_t pid;
	int rc = posix_spawnp(&pid, "nft", &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[0]);
	if (rc != 0) {
		close(pfd[1]);
		errno = rc;
		return -1;
	}
	size_t len = strlen(script), off = 0;
	while (off < len) {
		ssize_t n = write(pfd[1], script + off, len - off);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	close(pfd[1]);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static size_t appendf(char *buf, size_t cap, size_t off, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static size_t appendf(char *buf, size_t cap, size_t off, const char *fmt, ...)
{
	va_list ap;
	if (off >= cap)
		return off;
	va_start(ap, fmt);
	int n = vsnprintf(buf + off, cap - off, fmt, ap);
	va_end(ap);
	return n < 0 ? off : off + (size_t)n;
}

/* Subnets the host is directly attached to (other than its sandboxes'): its
 * neighbours are as off-limits as the host itself. */
static size_t host_subnet_rules(char *buf, size_t cap, size_t off)
{
	struct ifaddrs *ifa = NULL;
	if (getifaddrs(&ifa) < 0)
		return off;
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_netmask ||
		    strncmp(i->ifa_name, "ahs", 3) == 0)
			continue;
		uint32_t a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
		uint32_t mk = ((struct sockaddr_in *)i->ifa_netmask)->sin_addr.s_addr;
		struct in_addr net = { a & mk };
		char s[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &net, s, sizeof s);
		off = appendf(buf, cap, off, "    iifname \"ahs*\" ip daddr %s/%d drop\n", s,
		              __builtin_popcount(mk));
	}
	freeifaddrs(ifa);
	return off;
}

static size_t dns_rules(char *buf, size_t cap, size_t off)
{
	for (int i = 0; i < sb_g.ndns; i++) {
		char s[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &sb_g.dns[i], s, sizeof s);
		off = appendf(buf, cap, off,
		              "    iifname \"ahs*\" ip daddr %s udp dport 53 accept\n"
		              "    iifname \"ahs*\" ip daddr %s tcp dport 53 accept\n", s, s);
	}
	return off;
}

int sb_net_policy_install(ah_err *err)
{
	char s[8192];
	size_t o = 0;
	/* "add" then "delete" then define: idempotent in one transaction. */
	o = appendf(s, sizeof s, o, "table inet agenthost\ndelete table inet agenthost\n"
	            "table inet agenthost {\n  chain input {\n"
	            "    type filter hook input priority filter - 10; policy accept;\n");
	o = dns_rules(s, sizeof s, o); /* a resolver may be one of the host's addresses */
	o = appendf(s, sizeof s, o, "    iifname \"ahs*\" %s\n  }\n", sb_g.allow_host ? "accept" : "drop");
	/* Nor does the host open connections into a sandbox. */
	o = appendf(s, sizeof s, o, "  chain output {\n"
	            "    type filter hook output priority filter - 10; policy accept;\n"
	            "    oifname \"ahs*\" ct state established,related accept\n"
	            "    oifname \"ahs*\" drop\n  }\n");
	o = appendf(s, sizeof s, o, "  chain forward {\n"
	            "    type filter hook forward priority filter - 10; policy accept;\n"
	            "    oifname \"ahs*\" ct state established,related accept\n"
	            "    oifname \"ahs*\" drop\n"
	            "    iifname \"ahs*\" meta nfproto ipv6 drop\n");
	o = dns_rules(s, sizeof s, o);
	o = appendf(s, sizeof s, o, "    iifname \"ahs*\" ip daddr { 0.0.0.0/8, 10.0.0.0/8, "
	            "100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12, 192.0.0.0/24, "
	            "192.168.0.0/16, 198.18.0.0/15, 224.0.0.0/3 } drop\n");
	if (!sb_g.allow_host)
		o = host_subnet_rules(s, sizeof s, o);
	o = appendf(s, sizeof s, o, "  }\n  chain postrouting {\n"
	            "    type nat hook postrouting priority srcnat; policy accept;\n"
	            "    ip saddr %u.%u.0.0/16 oifname != \"ahs*\" masquerade\n  }\n}\n",
	            sb_g.net_a, sb_g.net_b);
	if (o >= sizeof s)
		return ah_err_set(err, AH_EFAIL, "nft ruleset too long");
	if (run_nft(s) < 0)
		return ah_err_set(err, AH_EFAIL, "nft failed to install the sandbox policy "
		                  "(is nftables installed?)");
	return 0;
}

void sb_net_policy_remove(void)
{
	run_nft("table inet agenthost\ndelete table inet agenthost\n");
}
