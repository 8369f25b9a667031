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
 * sandbox are dropped. A sandbox whose egress allow-list opens private
 * ranges (egress.c, with egress_allow_private) has its veth in the set
 * private_ok, accepted before those drops: its own namespace's rules then
 * decide. An allow-list itself lives in the sandbox's namespace (egress.c),
 * not here: a runner recreating this shared table leaves it alone. IPv6 is off inside and dropped at the veth. The runner
 * socket is a unix socket in the host's filesystem and so invisible anyway.
 *
 * Links and addresses are configured with rtnetlink directly (netlink.c), both
 * ends by the runner (see the slot section below). */
#include "sandbox/internal.h"

#include "core/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- per slot: a network namespace kept while it stays clean ----
 *
 * Making a network namespace, its veth pair and its addresses, and tearing
 * them down again, was a third of the runner's work per sandbox. A slot keeps
 * its namespace between its sandboxes, for as long as this process holds the
 * slot, on one condition: it holds no socket at all, not even one in
 * TIME_WAIT, so that no sandbox can see in /proc/net where the last one was
 * connected. Nothing inside can change its configuration: agents have no
 * capability over it (it belongs to the host's user namespace) and the keeper
 * never touches it. The thread that sets one up enters it (setns affects only
 * the calling thread) and comes back. */

/* A dead sandbox's veth disappears asynchronously with its namespace. */
static void wait_gone(const char *name)
{
	for (int i = 0; i < 200 && if_nametoindex(name) > 0; i++)
		usleep(5000);
}

static void go_home(int home)
{
	if (setns(home, CLONE_NEWNET) < 0) {
		/* A thread left in a sandbox's namespace would make every later
		 * veth and netlink request there: there is no going on. */
		ah_log_error("sandbox: cannot return to the host's network namespace: %s",
		             strerror(errno));
		abort();
	}
	close(home);
}

/* Value after `key` on the sockstat line that `line` starts (it may start
 * with the newline before it), or -1. */
static long sockstat_field(const char *buf, const char *line, const char *key)
{
	const char *l = strstr(buf, line);
	const char *eol = l ? strchr(l + 1, '\n') : NULL;
	const char *k = l ? strstr(l, key) : NULL;
	if (!k || (eol && k > eol))
		return -1;
	char *end;
	long v = strtol(k + strlen(key), &end, 10);
	return end == k + strlen(key) ? -1 : v;
}

/* True when the namespace holds no socket of any kind. sockstat's "sockets:
 * used" counts every socket in the namespace; TIME_WAIT ones are not sockets
 * any more and have their own count. */
static bool ns_empty(int ns)
{
	int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home < 0)
		return false;
	if (setns(ns, CLONE_NEWNET) < 0) {
		close(home);
		return false;
	}
	char buf[1024];
	ssize_t n = -1;
	int fd = open("/proc/thread-self/net/sockstat", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof buf - 1);
		close(fd);
	}
	go_home(home);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return sockstat_field(buf, "sockets:", " used ") == 0 &&
	       sockstat_field(buf, "\nTCP:", " inuse ") == 0 &&
	       sockstat_field(buf, "\nTCP:", " tw ") == 0 &&
	       sockstat_field(buf, "\nUDP:", " inuse ") == 0 &&
	       sockstat_field(buf, "\nRAW:", " inuse ") == 0;
}

static int host_side(const sb_plan *p, int ns, ah_err *err)
{
	int rc = sb_nl_create_veth(p->veth, ns);
	if (rc < 0 && errno == EEXIST) {
		sb_nl_delete_link(p->veth); /* left by a crashed run */
		wait_gone(p->veth);
		rc = sb_nl_create_veth(p->veth, ns);
	}
	if (rc < 0)
		return ah_err_set(err, AH_EFAIL, "create veth %s: %s", p->veth, strerror(errno));
	int idx = (int)if_nametoindex(p->veth);
	sb_nl_disable_ipv6(p->veth);
	if (idx <= 0 || sb_nl_add_addr(idx, p->host_ip) < 0 || sb_nl_link_up(idx) < 0)
		return ah_err_set(err, AH_EFAIL, "configure %s: %s", p->veth, strerror(errno));
	return 0;
}

static int inside(const sb_plan *p, int ns, ah_err *err)
{
	int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home < 0 || setns(ns, CLONE_NEWNET) < 0) {
		int e = errno;
		if (home >= 0)
			close(home);
		return ah_err_set(err, AH_EFAIL, "enter the network namespace: %s", strerror(e));
	}
	const char *what = "";
	int rc = sb_net_inside_setup(p, &what);
	int e = errno;
	go_home(home);
	return rc < 0 ? ah_err_set(err, AH_EFAIL, "%s: %s", what, strerror(e)) : 0;
}

/* A new namespace: this thread unshares into it, keeps a descriptor, and
 * comes back before anything else. */
static int ns_new(const sb_plan *p, int *out, ah_err *err)
{
	int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home < 0)
		return ah_err_set(err, AH_EFAIL, "open netns: %s", strerror(errno));
	if (unshare(CLONE_NEWNET) < 0) {
		int e = errno;
		close(home);
		return ah_err_set(err, AH_EFAIL, "new network namespace: %s", strerror(e));
	}
	int ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int e = errno;
	go_home(home);
	if (ns < 0)
		return ah_err_set(err, AH_EFAIL, "open netns: %s", strerror(e));
	int rc = host_side(p, ns, err);
	if (rc == 0)
		rc = inside(p, ns, err);
	if (rc != 0) {
		close(ns);
		sb_net_host_teardown(p);
		return rc;
	}
	*out = ns;
	return 0;
}

int sb_net_slot_setup(const sb_plan *p, int *ns, ah_err *err)
{
	if (*ns >= 0 && ns_empty(*ns))
		return 0;
	sb_net_slot_drop(p, ns);
	return ns_new(p, ns, err);
}

void sb_net_slot_drop(const sb_plan *p, int *ns)
{
	if (*ns < 0)
		return;
	close(*ns);
	*ns = -1;
	sb_net_host_teardown(p);
}

/* Deleting one end deletes the pair; done explicitly because the kernel
 * tears down a dead namespace's devices asynchronously. */
void sb_net_host_teardown(const sb_plan *p)
{
	sb_nl_delete_link(p->veth);
	wait_gone(p->veth); /* before the slot (and so the name) is reused */
}

/* ---- a listener inside: the model gateway (runner/gateway.c) ----
 *
 * A socket belongs to the namespace it was created in, whichever thread later
 * uses it: this thread enters the slot's namespace only to create the socket.
 * Its traffic never leaves that namespace's loopback, so no firewall rule and
 * no host address is involved, and no other sandbox can reach it. */
static int listen_here(int port, int *out)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 16) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	*out = fd;
	return 0;
}

int sb_net_listen_loopback(int ns, int port, int *out, ah_err *err)
{
	int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (ns < 0 || home < 0 || setns(ns, CLONE_NEWNET) < 0) {
		int e = ns < 0 ? EBADF : errno;
		if (home >= 0)
			close(home);
		return ah_err_set(err, AH_EFAIL, "enter the network namespace: %s", strerror(e));
	}
	int rc = listen_here(port, out);
	int e = errno;
	go_home(home);
	return rc < 0 ? ah_err_set(err, AH_EFAIL, "listen on 127.0.0.1:%d: %s", port, strerror(e)) : 0;
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
	            "table inet agenthost {\n  set private_ok { type ifname; }\n  chain input {\n"
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
	/* A sandbox whose allow-list opens private ranges (egress.c): its own
	 * namespace refuses everything else already. */
	o = appendf(s, sizeof s, o, "    iifname @private_ok accept\n");
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

int sb_net_nft(int ns, const char *script)
{
	if (ns < 0)
		return run_nft(script);
	/* nft runs in the namespace of the thread that starts it. */
	int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home < 0 || setns(ns, CLONE_NEWNET) < 0) {
		if (home >= 0)
			close(home);
		return -1;
	}
	int rc = run_nft(script);
	go_home(home);
	return rc;
}

int sb_net_private_ok(const char *veth, bool on)
{
	char s[256];
	/* "add" first: deleting an element that is not there fails. */
	snprintf(s, sizeof s, "add element inet agenthost private_ok { \"%s\" }\n", veth);
	if (!on)
		snprintf(s + strlen(s), sizeof s - strlen(s),
		         "delete element inet agenthost private_ok { \"%s\" }\n", veth);
	return run_nft(s);
}

void sb_net_policy_remove(void)
{
	run_nft("table inet agenthost\ndelete table inet agenthost\n");
}
