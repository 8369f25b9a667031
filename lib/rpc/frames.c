/* See rpc/rpc.h: the sealed frames. */
#include "rpc/rpc.h"
#include "core/io.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LABEL_C2S "agenthost-runner wire client"
#define LABEL_S2C "agenthost-runner wire runner"
#define CONNECT_TIMEOUT_MS 5000
/* A frame's buffer grows as its bytes arrive: a peer that announces 64 MiB
 * and stalls holds 1 MiB, not 64. */
#define FIRST_CHUNK (1u << 20)
#define TAG_MESSAGE crypto_secretstream_xchacha20poly1305_TAG_MESSAGE
#define TAG_FINAL crypto_secretstream_xchacha20poly1305_TAG_FINAL

_Static_assert(AH_RWIRE_KEY_BYTES == 32 && AH_RAUTH_KEY_BYTES == crypto_generichash_KEYBYTES,
               "a BLAKE2b-256 output is a secretstream key");

/* ---- keys ---- */

static void derive(unsigned char out[AH_RWIRE_KEY_BYTES], const ah_rauth_key *key,
                   const char *label, const ah_rauth_nonces *n)
{
	crypto_generichash_state st;
	crypto_generichash_init(&st, key->k, sizeof key->k, AH_RWIRE_KEY_BYTES);
	crypto_generichash_update(&st, (const unsigned char *)label, strlen(label));
	crypto_generichash_update(&st, n->sn, sizeof n->sn);
	crypto_generichash_update(&st, n->cn, sizeof n->cn);
	crypto_generichash_update(&st, n->dh, sizeof n->dh);
	crypto_generichash_final(&st, out, AH_RWIRE_KEY_BYTES);
	sodium_memzero(&st, sizeof st);
}

void ah_rwire_keys(const ah_rauth_key *key, const ah_rauth_nonces *n,
                   unsigned char c2s[AH_RWIRE_KEY_BYTES], unsigned char s2c[AH_RWIRE_KEY_BYTES])
{
	derive(c2s, key, LABEL_C2S, n);
	derive(s2c, key, LABEL_S2C, n);
}

void ah_rwire_start(ah_rwire *w, int fd, const ah_rauth_key *key, const ah_rauth_nonces *n,
                    bool runner_side)
{
	unsigned char c2s[AH_RWIRE_KEY_BYTES], s2c[AH_RWIRE_KEY_BYTES];
	memset(w, 0, sizeof *w);
	w->fd = fd;
	ah_rwire_keys(key, n, c2s, s2c);
	crypto_secretstream_xchacha20poly1305_init_push(&w->tx, w->tx_header, runner_side ? s2c : c2s);
	memcpy(w->rx_key, runner_side ? c2s : s2c, sizeof w->rx_key);
	sodium_memzero(c2s, sizeof c2s);
	sodium_memzero(s2c, sizeof s2c);
}

void ah_rwire_wipe(ah_rwire *w)
{
	int fd = w->fd;
	sodium_memzero(w, sizeof *w);
	w->fd = fd;
	w->broken = true;
}

/* ---- frames ---- */

static void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static uint32_t get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int ah_rwire_send(ah_rwire *w, const void *msg, size_t len, bool last, ah_err *err)
{
	if (w->tx_ended || w->broken)
		return ah_err_set(err, AH_EINVALID, "the sending stream has ended");
	if (len > AH_RWIRE_MAX_FRAME - AH_RWIRE_OVERHEAD)
		return ah_err_set(err, AH_ETOOBIG, "message of %zu bytes exceeds a frame", len);
	size_t hl = w->header_sent ? 0 : AH_RWIRE_HEADER_BYTES, clen = len + AH_RWIRE_OVERHEAD;
	unsigned char *buf = malloc(hl + 4 + clen);
	if (!buf)
		return ah_err_set(err, AH_EFAIL, "out of memory for a %zu-byte frame", clen);
	memcpy(buf, w->tx_header, hl);
	put_be32(buf + hl, (uint32_t)clen);
	crypto_secretstream_xchacha20poly1305_push(&w->tx, buf + hl + 4, NULL, msg, len, buf + hl, 4,
	                                           last ? TAG_FINAL : TAG_MESSAGE);
	int rc = ah_send_all(w->fd, buf, hl + 4 + clen);
	free(buf);
	w->header_sent = true;
	w->tx_ended = last;
	return rc ? ah_err_set(err, AH_EFAIL, "the peer went away while we sent") : 0;
}

/* Exactly n bytes by the deadline. AH_EFAIL on EOF: *got says how far it came. */
static int read_exact(int fd, unsigned char *p, size_t n, int64_t deadline, size_t *got)
{
	*got = 0;
	while (*got < n) {
		ssize_t r = ah_read_until(fd, p + *got, n - *got, deadline);
		if (r == AH_ETIMEOUT)
			return AH_ETIMEOUT;
		if (r <= 0)
			return AH_EFAIL;
		*got += (size_t)r;
	}
	return 0;
}

/* Maps a short read to an error naming what was cut. */
static int read_part(int fd, unsigned char *p, size_t n, int64_t deadline, const char *what,
                     bool first, ah_err *err)
{
	size_t got = 0;
	int rc = read_exact(fd, p, n, deadline, &got);
	if (rc == AH_ETIMEOUT)
		return ah_err_set(err, AH_ETIMEOUT, "no complete %s in time", what);
	if (rc != 0 && first && got == 0)
		return ah_err_set(err, AH_EFAIL, "the stream ended before its %s", what);
	if (rc != 0)
		return ah_err_set(err, AH_EFAIL, "truncated %s (%zu of %zu bytes)", what, got, n);
	return 0;
}

/* The ciphertext of len bytes, into a buffer grown as it arrives. */
static int read_body(int fd, size_t len, int64_t deadline, unsigned char **out, ah_err *err)
{
	size_t cap = len < FIRST_CHUNK ? len : FIRST_CHUNK, n = 0;
	unsigned char *buf = malloc(cap);
	while (buf && n < len) {
		if (n == cap) {
			size_t nc = cap * 4 < len ? cap * 4 : len;
			unsigned char *nb = realloc(buf, nc);
			if (!nb)
				break;
			buf = nb;
			cap = nc;
		}
		int rc = read_part(fd, buf + n, cap - n, deadline, "frame", false, err);
		if (rc != 0) {
			free(buf);
			return rc;
		}
		n = cap;
	}
	if (!buf || n < len) {
		free(buf);
		return ah_err_set(err, AH_EFAIL, "out of memory for a %zu-byte frame", len);
	}
	*out = buf;
	return 0;
}

static int read_header(ah_rwire *w, int64_t deadline, ah_err *err)
{
	unsigned char h[AH_RWIRE_HEADER_BYTES];
	int rc = read_part(w->fd, h, sizeof h, deadline, "stream header", true, err);
	if (rc == 0 && crypto_secretstream_xchacha20poly1305_init_pull(&w->rx, h, w->rx_key) != 0)
		rc = ah_err_set(err, AH_EDENIED, "unusable stream header");
	sodium_memzero(w->rx_key, sizeof w->rx_key);
	w->header_read = true;
	return rc;
}

/* Opens ct (clen bytes, lenbuf its additional data) into a fresh buffer. */
static int open_frame(ah_rwire *w, const unsigned char *ct, size_t clen,
                      const unsigned char lenbuf[4], unsigned char **msg, size_t *len, ah_err *err)
{
	unsigned long long mlen = 0;
	unsigned char tag = 0;
	unsigned char *m = malloc(clen - AH_RWIRE_OVERHEAD + 1);
	if (!m)
		return ah_err_set(err, AH_EFAIL, "out of memory for a %zu-byte frame", clen);
	if (crypto_secretstream_xchacha20poly1305_pull(&w->rx, m, &mlen, &tag, ct, clen, lenbuf, 4) != 0) {
		free(m);
		return ah_err_set(err, AH_EDENIED, "a frame failed authentication "
		                  "(tampered, replayed, out of order or sealed with other keys)");
	}
	if (tag != TAG_MESSAGE && tag != TAG_FINAL) {
		sodium_memzero(m, mlen);
		free(m);
		return ah_err_set(err, AH_EINVALID, "a frame with an unexpected tag %u", tag);
	}
	m[mlen] = '\0';
	*msg = m;
	*len = (size_t)mlen;
	w->rx_ended = tag == TAG_FINAL;
	return 0;
}

static int recv_frame(ah_rwire *w, size_t cap, int64_t deadline, unsigned char **msg, size_t *len,
                      ah_err *err)
{
	unsigned char lenbuf[4], *ct = NULL;
	if (w->broken || w->rx_ended)
		return ah_err_set(err, AH_EINVALID, "the receiving stream has ended");
	int rc = w->header_read ? 0 : read_header(w, deadline, err);
	if (rc == 0)
		rc = read_part(w->fd, lenbuf, 4, deadline, "frame length", true, err);
	if (rc != 0)
		return rc;
	size_t clen = get_be32(lenbuf);
	if (clen < AH_RWIRE_OVERHEAD)
		return ah_err_set(err, AH_EINVALID, "a frame of %zu bytes is too short", clen);
	if (clen > AH_RWIRE_MAX_FRAME || clen - AH_RWIRE_OVERHEAD > cap)
		return ah_err_set(err, AH_ETOOBIG, "a frame of %zu bytes is over the limit", clen);
	if ((rc = read_body(w->fd, clen, deadline, &ct, err)) != 0)
		return rc;
	rc = open_frame(w, ct, clen, lenbuf, msg, len, err);
	free(ct);
	return rc;
}

int ah_rwire_recv(ah_rwire *w, size_t cap, int64_t deadline, unsigned char **msg, size_t *len,
                  ah_err *err)
{
	*msg = NULL;
	*len = 0;
	int rc = recv_frame(w, cap, deadline, msg, len, err);
	if (rc != 0)
		w->broken = true;
	return rc;
}

int ah_rwire_recv_last(ah_rwire *w, size_t cap, int64_t deadline, unsigned char **msg,
                       size_t *len, ah_err *err)
{
	int rc = ah_rwire_recv(w, cap, deadline, msg, len, err);
	if (rc != 0 || w->rx_ended)
		return rc;
	sodium_memzero(*msg, *len);
	free(*msg);
	*msg = NULL;
	*len = 0;
	w->broken = true;
	return ah_err_set(err, AH_EINVALID, "the message is not marked final");
}

/* ---- the client's call ---- */

/* Non-blocking connect bounded by CONNECT_TIMEOUT_MS, so a dead host does not
 * hold the worker for the kernel's minutes of SYN retries. */
static int connect_addr(const struct addrinfo *ai)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), e = 0;
	socklen_t el = sizeof e;
	if (fd < 0)
		return -1;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		if (errno != EINPROGRESS || poll(&p, 1, CONNECT_TIMEOUT_MS) != 1 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0 || e != 0) {
			close(fd);
			errno = e ? e : ETIMEDOUT;
			return -1;
		}
	}
	int one = 1, fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
		close(fd);
		return -1;
	}
	/* Handshake lines one after the other: without this Nagle holds each back. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

static int connect_tcp(const char *address, ah_err *err)
{
	char host[256], port[16];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res = NULL;
	int fd = -1;
	if (ah_hostport_split(address, host, sizeof host, port, sizeof port) != 0 ||
	    getaddrinfo(host, port, &hints, &res) != 0)
		return ah_err_set(err, AH_EINVALID, "bad or unresolvable address");
	for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next)
		fd = connect_addr(ai);
	freeaddrinfo(res);
	if (fd < 0)
		return ah_err_set(err, AH_EFAIL, "%s", strerror(errno));
	return fd;
}

/* A runner with no handshake slot for this host (AH_EBUSY) is tried again
 * after a short pause: a burst of calls from one API host may briefly hold
 * more handshakes than the runner gives one peer. */
#define DIAL_TRIES 4

int ah_rwire_dial(ah_rwire *w, const char *address, const ah_rauth_key *key, ah_err *err)
{
	ah_rauth_nonces n;
	int rc = AH_EBUSY;
	for (int t = 0; t < DIAL_TRIES && rc == AH_EBUSY; t++) {
		if (t > 0)
			ah_sleep_jittered(20000u << t, 20000);
		int fd = connect_tcp(address, err);
		if (fd < 0)
			return fd;
		if ((rc = ah_rauth_client(fd, key, &n, err)) == 0) {
			ah_rwire_start(w, fd, key, &n, false);
			return 0;
		}
		close(fd);
	}
	return rc;
}

int ah_rwire_exchange(ah_rwire *w, const char *req, size_t len, int timeout_ms,
                      unsigned char **ans, size_t *alen, ah_err *err)
{
	*ans = NULL;
	*alen = 0;
	int rc = ah_rwire_send(w, req, len, true, err);
	return rc ? rc : ah_rwire_recv_last(w, AH_RWIRE_MAX_FRAME, ah_now_ms() + timeout_ms, ans,
	                                    alen, err);
}
