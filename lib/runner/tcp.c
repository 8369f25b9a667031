/* The runner's optional TCP listener, for API workers on other hosts
 * (docs/runner-protocol.md, "TCP"). Off unless runner_listen is set, and then
 * refused at start-up without a runner secret: an open TCP port that runs code
 * for anyone who connects is the one thing this file must never produce.
 *
 * Every accepted connection proves the secret with the challenge-response of
 * lib/rpc/auth.c before its request is read; a peer that fails is
 * told so and closed, and the failure is logged with its address (never with
 * key material). What follows the handshake, the request and its answer,
 * travels sealed with keys of this connection alone (rpc/rpc.h, frames).
 * Sandboxes cannot connect: the nft policy (lib/sandbox/net.c)
 * drops what they send to any of this host's addresses and to private ranges.
 * A stranger who never answers holds a handshake slot for AH_RAUTH_TIMEOUT_MS:
 * one peer gets a share of them, not all (handshakes.c). */
#include "runner/runner.h"
#include "runner/handshakes.h"
#include "rpc/rpc.h"
#include "core/io.h"
#include "core/log.h"
#include "core/util.h"
#include "core/settings.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int tcp_fd = -1;
static ah_rauth_key key;

static int bind_listener(const char *host, const char *port, ah_err *err)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	int g = getaddrinfo(host, port, &hints, &res), e = 0, one = 1;
	if (g != 0)
		return ah_err_set(err, AH_EFAIL, "runner_listen %s:%s: %s", host, port, gai_strerror(g));
	for (struct addrinfo *ai = res; ai && tcp_fd < 0; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
		if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
		    bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
			e = errno;
			if (fd >= 0)
				close(fd);
			continue;
		}
		tcp_fd = fd;
	}
	freeaddrinfo(res);
	if (tcp_fd < 0)
		return ah_err_set(err, AH_EFAIL, "cannot listen on %s:%s: %s", host, port, strerror(e));
	return 0;
}

static int bound_port(void)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	if (getsockname(tcp_fd, (struct sockaddr *)&ss, &sl) != 0)
		return -1;
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* runner_advertise, else the listen address with the port really bound (port
 * 0 picks a free one: the test stack does that). A wildcard host means
 * nothing to another machine, so the host name stands in for it. */
static int set_address(struct ah_runner *r, const char *host, ah_err *err)
{
	const char *adv = ah_settings_of(r->cfg)->runner.advertise;
	char h[256], p[16];
	if (*adv) {
		if (ah_hostport_split(adv, h, sizeof h, p, sizeof p) != 0 ||
		    strlen(adv) >= sizeof r->address)
			return ah_err_set(err, AH_EINVALID, "runner_advertise %s: not host:port", adv);
		snprintf(r->address, sizeof r->address, "%s", adv);
		return 0;
	}
	snprintf(h, sizeof h, "%s", host);
	if (strcmp(h, "0.0.0.0") == 0 || strcmp(h, "::") == 0) {
		if (gethostname(h, sizeof h - 1) != 0)
			return ah_err_set(err, AH_EFAIL, "gethostname: %s", strerror(errno));
		h[sizeof h - 1] = '\0';
		ah_log_warn("runner_listen is a wildcard address: advertising host name %s "
		            "(set runner_advertise if other hosts cannot resolve it)", h);
	}
	int port = bound_port();
	bool v6 = strchr(h, ':') != NULL;
	if (port <= 0 || (size_t)snprintf(r->address, sizeof r->address, v6 ? "[%s]:%d" : "%s:%d",
	                                  h, port) >= sizeof r->address)
		return ah_err_set(err, AH_EFAIL, "cannot form the runner's TCP address");
	return 0;
}

int ah_tcp_listen(struct ah_runner *r, ah_err *err)
{
	const char *listen_on = ah_settings_of(r->cfg)->runner.listen;
	char host[256], port[16];
	size_t sl = strlen(r->socket_path);
	if (!*listen_on) {
		/* runners.address is VARCHAR(255) */
		if (sl >= sizeof r->address)
			return ah_err_set(err, AH_EINVALID, "socket path too long to register: %s",
			                  r->socket_path);
		memcpy(r->address, r->socket_path, sl + 1);
		return 0;
	}
	if (ah_hostport_split(listen_on, host, sizeof host, port, sizeof port) != 0)
		return ah_err_set(err, AH_EINVALID, "runner_listen %s: not host:port", listen_on);
	/* That switch lets sandboxes reach this host's addresses: this port too. */
	if (ah_settings_of(r->cfg)->sandbox.allow_loopback_egress)
		return ah_err_set(err, AH_EINVALID, "runner_listen is refused with "
		                  "sandbox_allow_loopback_egress = 1: sandboxes could reach the port");
	int rc = ah_rauth_key_load(&key, r->cfg, err);
	if (rc == AH_ENOTFOUND)
		return ah_err_set(err, AH_EINVALID, "runner_listen is set but no runner_secret or "
		                  "runner_secret_file is: refusing an unauthenticated TCP port");
	if (rc != 0 || (rc = bind_listener(host, port, err)) != 0)
		return rc;
	if ((rc = set_address(r, host, err)) != 0)
		return rc;
	ah_log_info("listening on tcp %s (advertised as %s), shared secret required", listen_on,
	            r->address);
	return 0;
}

int ah_tcp_fd(void)
{
	return tcp_fd;
}

void ah_tcp_close(void)
{
	if (tcp_fd >= 0)
		close(tcp_fd);
	tcp_fd = -1;
	/* The key stays: handshakes still in flight read it until they end. */
}

/* The peer's address for log lines (into out) and, when hs is given, as
 * handshakes are counted. */
static void peer_of(int fd, char *out, size_t cap, ah_hs_peer *hs)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char host[INET6_ADDRSTRLEN] = "?", port[8] = "?";
	bool known = getpeername(fd, (struct sockaddr *)&ss, &sl) == 0;
	if (known)
		getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, port, sizeof port,
		            NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(out, cap, "%s port %s", host, port);
	if (hs)
		ah_hs_peer_of(hs, known ? (struct sockaddr *)&ss : NULL);
}

bool ah_tcp_admit(int fd, struct ah_rwire *w)
{
	char peer[96];
	ah_err err = {0};
	ah_rauth_nonces n;
	int one = 1;
	ah_hs_peer hs;
	peer_of(fd, peer, sizeof peer, &hs);
	if (!ah_hs_take(&hs)) {
		ah_log_warn("tcp peer %s: too many handshakes in flight; closed", peer);
		return false;
	}
	/* Small lines one after the other: without this Nagle holds each back. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	int rc = ah_rauth_server(fd, &key, &n, &err);
	ah_hs_give(&hs);
	if (rc != 0) {
		ah_log_warn("tcp peer %s: authentication failed: %s", peer, err.msg);
		return false;
	}
	ah_rwire_start(w, fd, &key, &n, true);
	return true;
}

char *ah_tcp_read_request(struct ah_rwire *w, size_t cap, int timeout_ms, size_t *len)
{
	unsigned char *msg = NULL;
	ah_err err = {0};
	char peer[96];
	if (ah_rwire_recv_last(w, cap, ah_now_ms() + timeout_ms, &msg, len, &err) == 0)
		return (char *)msg;
	/* Past the handshake a failure is a broken link or someone tampering:
	 * worth a line, and no answer (there is no intact request to answer). */
	peer_of(w->fd, peer, sizeof peer, NULL);
	ah_log_warn("tcp peer %s: request refused: %s", peer, err.msg);
	return NULL;
}
