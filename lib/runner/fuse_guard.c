/* The connections one rclone makes: each connect() is stopped by a seccomp
 * filter and decided here, on the address and port it would reach, before
 * the kernel makes it (see fuse_internal.h).
 *
 * Why here and not a network namespace: rclone resolves names itself, again
 * for each new connection, and follows an endpoint's HTTP redirects (Go's
 * client, 301/302/307/308) to wherever they point, so a check of the
 * endpoint's addresses before the start (all we had) let a tenant's endpoint
 * send rclone to the runner's loopback or to 169.254.169.254 by a redirect
 * or by a DNS answer that changes (rebinding). A namespace would need a
 * resolver, a route and NAT of its own and could still not reach the
 * loopback storage of a development setup; a check of the address each
 * connection is about to reach needs none of that and costs a filter and a
 * thread per mount.
 *
 * A connection is allowed when:
 *   - it is not to an IPv4 or IPv6 address (unix sockets, netlink); or
 *   - it is to port 53 of a resolver of /etc/resolv.conf (rclone's lookups);
 *   - and otherwise the address passes the storage policy (no link-local or
 *     metadata address ever, private ones only as storage_allow_hosts lists
 *     them), and, when the tenant named the host (endpoint_url, a GCS key's
 *     token_uri), it is that host's port and one of the addresses that host
 *     resolves to now (looked up again, at most once a second, when an
 *     address is not among the last answer's): a redirect to another host or
 *     port is refused.
 * Refused: connect() fails with EACCES, which rclone reports as an I/O
 * error; the runner's log says what was refused. Without an endpoint
 * (AWS's or Google's own hosts) only the policy applies.
 *
 * The filter also refuses io_uring (whose connect no filter sees) and other
 * ABIs' system calls. The supervisor trusts rclone's own memory: the
 * attacker is the endpoint, not the program, so the address read here is the
 * one connect() uses (SECCOMP_USER_NOTIF_FLAG_CONTINUE re-reads it). If the
 * runner dies, the listener closes and every connect() fails. */
#include "runner/fuse_internal.h"
#include "core/log.h"
#include "core/util.h"
#include "deploy/deploy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif
#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "fuse_guard.c: add this architecture's AUDIT_ARCH"
#endif

#define MAX_PINS 2
#define MAX_ADDRS 16
#define MAX_DNS 4
#define RESOLVE_EVERY_MS 1000

/* A host the tenant named, with the addresses its last lookup gave. */
struct pin {
	char host[256];
	int port;
	struct sockaddr_storage addr[MAX_ADDRS];
	int n;
	int64_t resolved_ms;
};

struct ah_fuse_guard {
	ah_addr_policy policy;
	char *allow_hosts;
	struct pin pins[MAX_PINS];
	int npins;
	struct sockaddr_storage dns[MAX_DNS];
	int ndns;
	char who[160];
	int listener;
	int stop[2];
	pthread_t thread;
	bool running;
};

/* ---- addresses ---- */

static int port_of(const struct sockaddr_storage *s)
{
	return ntohs(s->ss_family == AF_INET ? ((const struct sockaddr_in *)s)->sin_port
	                                     : ((const struct sockaddr_in6 *)s)->sin6_port);
}

static const char *addr_text(char *buf, size_t n, const struct sockaddr_storage *s)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	const void *a = s->ss_family == AF_INET ? (const void *)&((const struct sockaddr_in *)s)->sin_addr
	                                        : (const void *)&((const struct sockaddr_in6 *)s)->sin6_addr;
	inet_ntop(s->ss_family, a, ip, sizeof(ip));
	snprintf(buf, n, s->ss_family == AF_INET ? "%s:%d" : "[%s]:%d", ip, port_of(s));
	return buf;
}

/* The pin's host looked up now. */
static int resolve(struct pin *p)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	p->resolved_ms = ah_now_ms();
	if (getaddrinfo(p->host, NULL, &hints, &res) != 0)
		return -1;
	p->n = 0;
	for (struct addrinfo *ai = res; ai && p->n < MAX_ADDRS; ai = ai->ai_next)
		if (ai->ai_family == AF_INET || ai->ai_family == AF_INET6)
			memcpy(&p->addr[p->n++], ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

static bool pin_has(const struct pin *p, const struct sockaddr_storage *s)
{
	for (int i = 0; i < p->n; i++)
		if (ah_addr_same(&p->addr[i], s))
			return true;
	return false;
}

static bool pinned(struct ah_fuse_guard *g, const struct sockaddr_storage *s)
{
	int port = port_of(s);
	for (int i = 0; i < g->npins; i++) {
		struct pin *p = &g->pins[i];
		if (p->port != port)
			continue;
		if (pin_has(p, s))
			return true;
		/* The host's addresses change (DNS rotation): ask again. */
		if (ah_now_ms() - p->resolved_ms >= RESOLVE_EVERY_MS && resolve(p) == 0 && pin_has(p, s))
			return true;
	}
	return false;
}

/* NULL when the connection may be made, else why not (for the log). */
static const char *refusal(struct ah_fuse_guard *g, const struct sockaddr_storage *s)
{
	if (s->ss_family != AF_INET && s->ss_family != AF_INET6)
		return NULL;
	for (int i = 0; i < g->ndns; i++)
		if (port_of(s) == 53 && ah_addr_same(&g->dns[i], s))
			return NULL;
	switch (ah_addr_policy_check(&g->policy, (const struct sockaddr *)s)) {
	case AH_ADDR_FORBIDDEN:
		return "a link-local or cloud metadata address";
	case AH_ADDR_PRIVATE:
		return "a loopback, private or CGNAT address storage_allow_hosts does not list";
	default:
		break;
	}
	if (g->npins > 0 && !pinned(g, s))
		return "not the bucket's endpoint (a redirect or another host)";
	return NULL;
}

/* ---- the supervisor ---- */

static void answer(struct ah_fuse_guard *g, struct seccomp_notif *req,
                   struct seccomp_notif_resp *resp)
{
	struct sockaddr_storage s;
	memset(&s, 0, sizeof(s));
	size_t len = req->data.args[2] < sizeof(s) ? (size_t)req->data.args[2] : sizeof(s);
	struct iovec local = {&s, len}, remote = {(void *)(uintptr_t)req->data.args[1], len};
	const char *why = "an unreadable address";
	if (len >= sizeof(sa_family_t) &&
	    process_vm_readv((pid_t)req->pid, &local, 1, &remote, 1, 0) == (ssize_t)len)
		why = refusal(g, &s);
	/* The thread may have gone (and its id been reused) meanwhile. */
	if (ioctl(g->listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) < 0)
		return;
	resp->id = req->id;
	resp->val = 0;
	resp->error = why ? -EACCES : 0;
	resp->flags = why ? 0 : SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	ioctl(g->listener, SECCOMP_IOCTL_NOTIF_SEND, resp);
	if (why) {
		char a[INET6_ADDRSTRLEN + 16];
		ah_log_warn("%s: refused rclone's connection to %s: %s", g->who,
		            addr_text(a, sizeof(a), &s), why);
	}
}

static void *serve(void *ud)
{
	struct ah_fuse_guard *g = ud;
	struct seccomp_notif_sizes sz = {sizeof(struct seccomp_notif),
	                                 sizeof(struct seccomp_notif_resp), 0};
	syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz);
	struct seccomp_notif *req = calloc(1, sz.seccomp_notif > sizeof(*req) ? sz.seccomp_notif
	                                                                       : sizeof(*req));
	struct seccomp_notif_resp *resp = calloc(1, sz.seccomp_notif_resp > sizeof(*resp)
	                                            ? sz.seccomp_notif_resp : sizeof(*resp));
	while (req && resp) {
		struct pollfd pf[2] = {{.fd = g->listener, .events = POLLIN},
		                       {.fd = g->stop[0], .events = POLLIN}};
		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
		if (pf[1].revents)
			break;
		if (pf[0].revents & POLLIN) {
			memset(req, 0, sz.seccomp_notif);
			memset(resp, 0, sz.seccomp_notif_resp);
			if (ioctl(g->listener, SECCOMP_IOCTL_NOTIF_RECV, req) == 0)
				answer(g, req, resp);
		} else if (pf[0].revents & (POLLHUP | POLLERR | POLLNVAL)) {
			break; /* every process under the filter has ended */
		}
	}
	free(req);
	free(resp);
	return NULL;
}

/* ---- set-up ---- */

static void load_resolvers(struct ah_fuse_guard *g)
{
	FILE *f = fopen("/etc/resolv.conf", "re");
	char line[512], ip[256];
	while (f && g->ndns < MAX_DNS && fgets(line, sizeof(line), f)) {
		struct sockaddr_storage s;
		if (sscanf(line, " nameserver %255s", ip) != 1 ||
		    ah_addr_parse(&s, ip) != AH_ADDR_TEXT_ADDRESS)
			continue;
		((struct sockaddr_in *)&s)->sin_port = htons(53); /* sin6_port's offset too */
		g->dns[g->ndns++] = s;
	}
	if (f)
		fclose(f);
	if (g->ndns == 0) { /* what resolvers use without a nameserver line */
		struct sockaddr_in lo = {.sin_family = AF_INET, .sin_port = htons(53),
		                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		memcpy(&g->dns[g->ndns++], &lo, sizeof(lo));
	}
}

/* A host the tenant named (url): resolved, every address checked. */
static int add_pin(struct ah_fuse_guard *g, const char *url, ah_err *err)
{
	struct pin *p = &g->pins[g->npins];
	if (ah_git_url_host(p->host, sizeof(p->host), &p->port, url) != 0)
		return ah_err_set(err, AH_EINVALID, "no host in the URL");
	if (resolve(p) != 0 || p->n == 0)
		return ah_err_set(err, AH_EINVALID, "could not resolve %s", p->host);
	for (int i = 0; i < p->n; i++) {
		((struct sockaddr_in *)&p->addr[i])->sin_port = htons((uint16_t)p->port);
		enum ah_addr_kind k = ah_addr_policy_check(&g->policy, (struct sockaddr *)&p->addr[i]);
		if (k != AH_ADDR_PUBLIC)
			return ah_err_set(err, AH_EDENIED, "%s resolves to a %s address, which is not "
			                  "allowed", p->host, k == AH_ADDR_FORBIDDEN
			                  ? "link-local or metadata" : "loopback, private or CGNAT");
	}
	g->npins++;
	return 0;
}

/* A GCS key's token_uri: rclone asks it for tokens. */
static const char *token_uri(json_object *e)
{
	json_object *sa, *v;
	const char *s = json_object_object_get_ex(e, "service_account_json", &v)
	                ? json_object_get_string(v) : NULL;
	static __thread char uri[2048];
	if (!s || !(sa = json_tokener_parse(s)))
		return NULL;
	const char *u = json_object_object_get_ex(sa, "token_uri", &v) &&
	                json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
	snprintf(uri, sizeof(uri), "%s", u ? u : "");
	json_object_put(sa);
	return *uri ? uri : NULL;
}

int ah_fuse_guard_new(struct ah_fuse_guard **out, json_object *e, const ah_addr_policy *pol,
                      const char *who, ah_err *err)
{
	struct ah_fuse_guard *g = calloc(1, sizeof(*g));
	json_object *v;
	const char *endpoint = json_object_object_get_ex(e, "endpoint", &v) &&
	                       json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
	*out = NULL;
	if (!g || (pol->allow_hosts && !(g->allow_hosts = strdup(pol->allow_hosts)))) {
		free(g);
		return ah_err_set(err, AH_EFAIL, "out of memory");
	}
	g->policy = (ah_addr_policy){pol->allow_private, g->allow_hosts};
	g->listener = g->stop[0] = g->stop[1] = -1;
	snprintf(g->who, sizeof(g->who), "%s", who);
	load_resolvers(g);
	int rc = 0;
	/* Without an endpoint rclone talks to the provider's own hosts: no pin. */
	if (endpoint) {
		const char *uri = token_uri(e);
		rc = add_pin(g, endpoint, err);
		if (rc == 0 && uri)
			rc = add_pin(g, uri, err);
	}
	if (rc != 0) {
		ah_fuse_guard_free(g);
		return rc;
	}
	*out = g;
	return 0;
}

int ah_fuse_guard_child(int sock)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#ifdef __x86_64__
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000 /* x32 */, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
#endif
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_connect, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	/* Killable once received: Go's preemption signals would otherwise make
	 * the kernel abandon and resend the same connect() over and over. */
	int fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER |
	                      SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &prog);
	if (fd < 0 && errno == EINVAL)
		fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
		                  &prog);
	if (fd < 0)
		return -1;
	char c[CMSG_SPACE(sizeof(int))] = {0};
	char byte = 'g';
	struct iovec iov = {&byte, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c,
	                   .msg_controllen = sizeof(c)};
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof(int));
	ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL);
	close(fd);
	return n == 1 ? 0 : -1;
}

int ah_fuse_guard_start(struct ah_fuse_guard *g, int sock, ah_err *err)
{
	char c[CMSG_SPACE(sizeof(int))] = {0};
	char byte;
	struct iovec iov = {&byte, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c,
	                   .msg_controllen = sizeof(c)};
	ssize_t n;
	while ((n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	struct cmsghdr *h = n == 1 ? CMSG_FIRSTHDR(&m) : NULL;
	if (!h || h->cmsg_type != SCM_RIGHTS || h->cmsg_len != CMSG_LEN(sizeof(int)))
		return ah_err_set(err, AH_EFAIL, "rclone's connection filter could not be set up "
		                  "(seccomp user notification needs Linux 5.5 and CAP_SYS_ADMIN)");
	memcpy(&g->listener, CMSG_DATA(h), sizeof(int));
	if (pipe2(g->stop, O_CLOEXEC) < 0)
		return ah_err_set(err, AH_EFAIL, "pipe: %s", strerror(errno));
	int rc = pthread_create(&g->thread, NULL, serve, g);
	if (rc != 0)
		return ah_err_set(err, AH_EFAIL, "cannot start rclone's connection filter: %s",
		                  strerror(rc));
	g->running = true;
	return 0;
}

void ah_fuse_guard_free(struct ah_fuse_guard *g)
{
	if (!g)
		return;
	if (g->running) {
		char x = 's';
		if (write(g->stop[1], &x, 1) < 0)
			ah_log_warn("%s: cannot stop the connection filter's thread", g->who);
		pthread_join(g->thread, NULL);
	}
	for (int i = 0; i < 2; i++)
		if (g->stop[i] >= 0)
			close(g->stop[i]);
	if (g->listener >= 0)
		close(g->listener);
	free(g->allow_hosts);
	free(g);
}
