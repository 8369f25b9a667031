/* rtnetlink requests (links, addresses, routes), built on the stack: the veth
 * pair, and the configuration of both its ends (net.c). */
#include "sandbox/internal.h"

#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
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

int sb_nl_link_up(int idx)
{
	nlbuf m;
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = idx,
	                         .ifi_flags = IFF_UP, .ifi_change = IFF_UP };
	nl_start(&m, RTM_NEWLINK, 0, &ifi, sizeof ifi);
	return nl_talk(&m);
}

int sb_nl_add_addr(int idx, uint32_t ip)
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

int sb_nl_create_veth(const char *host, int peer_ns)
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
	uint32_t fd = (uint32_t)peer_ns;
	nl_attr(&m, IFLA_NET_NS_FD, &fd, 4);
	nl_end(&m, peer);
	nl_end(&m, data);
	nl_end(&m, info);
	return nl_talk(&m);
}

int sb_nl_delete_link(const char *name)
{
	nlbuf m;
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	nl_start(&m, RTM_DELLINK, 0, &ifi, sizeof ifi);
	nl_attr(&m, IFLA_IFNAME, name, strlen(name) + 1);
	return nl_talk(&m);
}

void sb_nl_disable_ipv6(const char *ifname)
{
	char path[128];
	snprintf(path, sizeof path, "/proc/sys/net/ipv6/conf/%s/disable_ipv6", ifname);
	sb_write_file(path, "1");
}

/* ---- inside the namespace (the calling thread has entered it) ---- */

#define STEP(expr, name) do { *what = (name); if ((expr) < 0) return -1; } while (0)

int sb_net_inside_setup(const sb_plan *p, const char **what)
{
	/* /proc/sys/net shows the opener's namespace: these are the sandbox's. */
	sb_nl_disable_ipv6("all");
	sb_nl_disable_ipv6("default");
	sb_nl_disable_ipv6("eth0");
	STEP(sb_nl_link_up(1), "loopback up"); /* lo is always ifindex 1 in a new netns */
	int idx = (int)if_nametoindex("eth0");
	STEP(idx > 0 ? 0 : -1, "find eth0");
	STEP(sb_nl_add_addr(idx, p->sb_ip), "address eth0");
	STEP(sb_nl_link_up(idx), "eth0 up");
	STEP(add_default_route(idx, p->host_ip), "default route");
	return 0;
}
