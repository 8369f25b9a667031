/* Unit test of lib/rpc/frames.c: the sealed frames that follow the
 * runner's TCP handshake. Round trips over socketpairs (a whole handshake
 * too), then a sender's raw bytes captured, tampered with and fed to a
 * receiver: every change must be refused. TAP. */
#include "rpc/rpc.h"
#include "core/util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tap.h"

#define SECRET "correct horse battery staple 0123456789"
#define OTHER "correct horse battery staple 0123456788"
#define REQUEST "{\"op\":\"run\",\"env\":{\"OPENAI_API_KEY\":\"sk-very-secret\"}}"
#define BIG (12u << 20) /* over the 10 MB default output, as base64 would be */

static ah_rauth_key key, other;

/* ---- capturing a sender's bytes ---- */

struct sender {
	ah_rwire w;
	const char **msgs; /* NULL-terminated; the last one FINAL when final */
	size_t *lens;
	bool final;
	int rc;
};

static void *send_all_msgs(void *arg)
{
	struct sender *s = arg;
	s->rc = 0;
	for (size_t i = 0; s->msgs[i] && s->rc == 0; i++)
		s->rc = ah_rwire_send(&s->w, s->msgs[i], s->lens[i], s->final && !s->msgs[i + 1], NULL);
	close(s->w.fd);
	return NULL;
}

/* What a client (or runner) sealing msgs under nonces n puts on the wire. */
static unsigned char *capture(const ah_rauth_key *k, const ah_rauth_nonces *n, bool runner_side,
                              const char **msgs, bool final, size_t *rawlen)
{
	int sv[2];
	pthread_t t;
	size_t lens[8], cap = 1 << 16, len = 0;
	unsigned char *raw = malloc(cap);
	for (size_t i = 0; msgs[i]; i++)
		lens[i] = strlen(msgs[i]);
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	struct sender s = {.msgs = msgs, .lens = lens, .final = final};
	ah_rwire_start(&s.w, sv[0], k, n, runner_side);
	pthread_create(&t, NULL, send_all_msgs, &s);
	for (ssize_t got; (got = read(sv[1], raw + len, cap - len)) > 0;) {
		len += (size_t)got;
		if (len == cap)
			raw = realloc(raw, cap *= 2);
	}
	pthread_join(t, NULL);
	close(sv[1]);
	ah_rwire_wipe(&s.w);
	*rawlen = len;
	return raw;
}

/* Feeds raw bytes (then EOF, unless keep_open) to a receiver and opens up to
 * two messages; rc of the first failure, or 0. *first gets the first one. */
static int deliver(const unsigned char *raw, size_t rawlen, const ah_rauth_key *k,
                   const ah_rauth_nonces *n, bool runner_side, bool keep_open, bool want_last,
                   char **first)
{
	int sv[2], rc;
	ah_rwire w;
	unsigned char *m = NULL;
	size_t len = 0;
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	if (rawlen && write(sv[1], raw, rawlen) != (ssize_t)rawlen)
		return -100;
	if (!keep_open)
		shutdown(sv[1], SHUT_WR);
	ah_rwire_start(&w, sv[0], k, n, runner_side);
	int64_t deadline = ah_now_ms() + (keep_open ? 300 : 3000);
	rc = want_last ? ah_rwire_recv_last(&w, 1 << 20, deadline, &m, &len, NULL)
	               : ah_rwire_recv(&w, 1 << 20, deadline, &m, &len, NULL);
	if (first)
		*first = (char *)m;
	else
		free(m);
	if (rc == 0 && !want_last) {
		rc = ah_rwire_recv(&w, 1 << 20, deadline, &m, &len, NULL);
		free(m);
	}
	ah_rwire_wipe(&w);
	close(sv[0]);
	close(sv[1]);
	return rc;
}

static void nonces(ah_rauth_nonces *n)
{
	randombytes_buf(n, sizeof *n);
}

/* ---- tests ---- */

static void test_keys(void)
{
	ah_rauth_nonces n, m;
	unsigned char c2s[32], s2c[32], c2s_m[32], s2c_m[32], want[32], in[28 + 96];
	nonces(&n);
	nonces(&m);
	ah_rwire_keys(&key, &n, c2s, s2c);
	ah_rwire_keys(&key, &m, c2s_m, s2c_m);
	ok(memcmp(c2s, s2c, 32) != 0, "keys: each direction has its own");
	ok(memcmp(c2s, c2s_m, 32) != 0, "keys: other nonces, other keys");
	m = n;
	m.dh[0] ^= 1;
	ah_rwire_keys(&key, &m, c2s_m, s2c_m);
	ok(memcmp(c2s, c2s_m, 32) != 0 && memcmp(s2c, s2c_m, 32) != 0,
	   "keys: same nonces, another X25519 secret: other keys (forward secrecy)");
	/* docs/runner-protocol.md: BLAKE2b-256(label | sn | cn | dh, key = secret's key) */
	memcpy(in, "agenthost-runner wire client", 28);
	memcpy(in + 28, n.sn, 32);
	memcpy(in + 60, n.cn, 32);
	memcpy(in + 92, n.dh, 32);
	crypto_generichash(want, 32, in, sizeof in, key.k, sizeof key.k);
	ok(memcmp(want, c2s, 32) == 0, "keys: client->runner key is the documented hash");
	memcpy(in, "agenthost-runner wire runner", 28);
	crypto_generichash(want, 32, in, sizeof in, key.k, sizeof key.k);
	ok(memcmp(want, s2c, 32) == 0, "keys: runner->client key is the documented hash");
}

static void test_layout(void)
{
	ah_rauth_nonces n;
	const char *msgs[] = {REQUEST, NULL};
	size_t rawlen, ml = strlen(REQUEST);
	nonces(&n);
	unsigned char *raw = capture(&key, &n, false, msgs, true, &rawlen);
	size_t flen = (size_t)raw[24] << 24 | (size_t)raw[25] << 16 | (size_t)raw[26] << 8 | raw[27];
	ok(rawlen == 24 + 4 + ml + 17 && flen == ml + 17,
	   "layout: 24-byte header, 4-byte big-endian length, message + 17 bytes (%zu)", rawlen);
	ok(!memmem(raw, rawlen, "sk-very-secret", 14) && !memmem(raw, rawlen, "\"op\"", 4),
	   "layout: nothing of the request in clear");
	char *m = NULL;
	ok(deliver(raw, rawlen, &key, &n, true, false, true, &m) == 0 && m && strcmp(m, REQUEST) == 0,
	   "round trip: the runner opens the client's request");
	free(m);
	free(raw);
}

struct peer {
	int fd;
	int rc;
	char *got;
};

/* The runner's side of a whole connection: handshake, request, answer. */
static void *runner_side(void *arg)
{
	struct peer *p = arg;
	ah_rauth_nonces n;
	ah_rwire w;
	unsigned char *m = NULL;
	size_t len = 0;
	p->rc = ah_rauth_server(p->fd, &key, &n, NULL);
	if (p->rc != 0)
		return NULL;
	ah_rwire_start(&w, p->fd, &key, &n, true);
	p->rc = ah_rwire_recv_last(&w, 48u << 20, ah_now_ms() + 10000, &m, &len, NULL);
	if (p->rc == 0) {
		char *ans = malloc(BIG + 32);
		memcpy(ans, "{\"ok\":true,\"stdout_b64\":\"", 25);
		memset(ans + 25, 'A', BIG);
		memcpy(ans + 25 + BIG, "\"}", 3);
		p->rc = ah_rwire_send(&w, ans, strlen(ans), true, NULL);
		free(ans);
	}
	p->got = (char *)m;
	ah_rwire_wipe(&w);
	return NULL;
}

static void test_whole_connection(void)
{
	int sv[2];
	pthread_t t;
	ah_rauth_nonces n;
	ah_rwire w;
	unsigned char *ans = NULL;
	size_t alen = 0;
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	struct peer p = {.fd = sv[0], .rc = -99};
	pthread_create(&t, NULL, runner_side, &p);
	int rc = ah_rauth_client(sv[1], &key, &n, NULL);
	if (rc == 0) {
		ah_rwire_start(&w, sv[1], &key, &n, false);
		rc = ah_rwire_exchange(&w, REQUEST, strlen(REQUEST), 10000, &ans, &alen, NULL);
		ok(ah_rwire_send(&w, "x", 1, false, NULL) != 0, "round trip: nothing is sent after FINAL");
		ah_rwire_wipe(&w);
	}
	pthread_join(t, NULL);
	close(sv[0]);
	close(sv[1]);
	ok(rc == 0 && p.rc == 0 && p.got && strcmp(p.got, REQUEST) == 0,
	   "round trip: handshake, then the request reaches the runner intact");
	ok(rc == 0 && alen == BIG + 27 && ans && ans[alen - 1] == '}' && ans[alen] == '\0',
	   "round trip: a %u MiB answer comes back whole", BIG >> 20);
	free(p.got);
	free(ans);
}

/* Flipping one bit anywhere must be noticed. */
static void test_tampering(void)
{
	ah_rauth_nonces n;
	const char *msgs[] = {REQUEST, NULL};
	size_t rawlen;
	nonces(&n);
	unsigned char *raw = capture(&key, &n, false, msgs, true, &rawlen);
	const struct {
		const char *desc;
		size_t at;
		unsigned char bit;
	} flips[] = {
		{"in the stream header", 3, 0x01},
		{"in the length (one less)", 27, 0x01},
		{"in the length (more than is there)", 26, 0x01},
		{"in the ciphertext's tag byte", 28, 0x80},
		{"in the ciphertext", 40, 0x04},
		{"in the MAC", 0, 0x01}, /* at: the last byte */
	};
	for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
		size_t at = flips[i].at ? flips[i].at : rawlen - 1;
		raw[at] ^= flips[i].bit;
		int rc = deliver(raw, rawlen, &key, &n, true, false, true, NULL);
		raw[at] ^= flips[i].bit;
		ok(rc != 0, "tampering: one bit flipped %s is refused (%d)", flips[i].desc, rc);
	}
	ok(deliver(raw, rawlen - 1, &key, &n, true, false, true, NULL) == AH_EFAIL,
	   "truncation: a frame missing its last byte is refused");
	ok(deliver(raw, 30, &key, &n, true, false, true, NULL) == AH_EFAIL,
	   "truncation: a frame cut after 2 bytes is refused");
	ok(deliver(raw, 24, &key, &n, true, false, true, NULL) == AH_EFAIL,
	   "truncation: a header and no frame is refused");
	ok(deliver(raw, 0, &key, &n, true, false, true, NULL) == AH_EFAIL,
	   "truncation: an empty stream is refused");
	ok(deliver(raw, rawlen - 5, &key, &n, true, true, true, NULL) == AH_ETIMEOUT,
	   "truncation: a frame that stalls times out");
	free(raw);
}

static void test_other_keys(void)
{
	ah_rauth_nonces n, m;
	const char *msgs[] = {REQUEST, NULL};
	size_t rawlen;
	nonces(&n);
	nonces(&m);
	unsigned char *raw = capture(&key, &n, false, msgs, true, &rawlen);
	ok(deliver(raw, rawlen, &key, &m, true, false, true, NULL) == AH_EDENIED,
	   "keys: a request sealed on another connection is refused");
	ok(deliver(raw, rawlen, &other, &n, true, false, true, NULL) == AH_EDENIED,
	   "keys: a request sealed under another secret is refused");
	ok(deliver(raw, rawlen, &key, &n, false, false, true, NULL) == AH_EDENIED,
	   "keys: a client's frame reflected back to the client is refused");
	free(raw);
}

/* Offsets of a capture's frames (after the 24-byte header). */
static size_t frames(const unsigned char *raw, size_t rawlen, size_t at[], size_t len[], size_t max)
{
	size_t k = 0;
	for (size_t p = 24; p + 4 <= rawlen && k < max; k++) {
		len[k] = 4 + ((size_t)raw[p] << 24 | (size_t)raw[p + 1] << 16 | (size_t)raw[p + 2] << 8 |
		              raw[p + 3]);
		at[k] = p;
		p += len[k];
	}
	return k;
}

/* The header, then the given frames of raw in the given order. */
static int reassembled(const unsigned char *raw, const size_t at[], const size_t len[],
                       const int order[2], const ah_rauth_nonces *n)
{
	unsigned char buf[4096];
	size_t bl = 24;
	memcpy(buf, raw, 24);
	for (int i = 0; i < 2; i++) {
		memcpy(buf + bl, raw + at[order[i]], len[order[i]]);
		bl += len[order[i]];
	}
	return deliver(buf, bl, &key, n, true, false, false, NULL);
}

static void test_order(void)
{
	ah_rauth_nonces n;
	const char *msgs[] = {"first", "second", "third", NULL};
	size_t rawlen, at[4], len[4];
	nonces(&n);
	unsigned char *raw = capture(&key, &n, false, msgs, true, &rawlen);
	size_t k = frames(raw, rawlen, at, len, 4);
	ok(k == 3, "order: three frames captured");
	ok(reassembled(raw, at, len, (int[]){0, 1}, &n) == 0, "order: frames in order open");
	ok(reassembled(raw, at, len, (int[]){1, 0}, &n) == AH_EDENIED,
	   "order: swapped frames are refused");
	ok(reassembled(raw, at, len, (int[]){0, 0}, &n) == AH_EDENIED,
	   "order: a replayed frame is refused");
	ok(reassembled(raw, at, len, (int[]){0, 2}, &n) == AH_EDENIED,
	   "order: a dropped frame is refused");
	char *m = NULL;
	ok(deliver(raw, at[1], &key, &n, true, false, true, &m) == AH_EINVALID && !m,
	   "order: a stream cut before its FINAL frame is refused");
	free(raw);
	raw = capture(&key, &n, false, msgs, false, &rawlen);
	ok(deliver(raw, rawlen, &key, &n, true, false, true, NULL) == AH_EINVALID,
	   "order: the one message not marked FINAL is refused");
	free(raw);
}

static void test_limits(void)
{
	ah_rauth_nonces n;
	unsigned char raw[64] = {0};
	const char *msgs[] = {REQUEST, NULL};
	size_t rawlen;
	nonces(&n);
	memset(raw + 24, 0xff, 4);
	ok(deliver(raw, 28, &key, &n, true, true, true, NULL) == AH_ETOOBIG,
	   "limits: a 4 GiB frame is refused before its bytes are read");
	raw[24] = 0x04; /* 64 MiB + 0xffffff */
	ok(deliver(raw, 28, &key, &n, true, true, true, NULL) == AH_ETOOBIG,
	   "limits: a frame just over 64 MiB is refused");
	memset(raw + 24, 0, 3);
	raw[27] = 16;
	ok(deliver(raw, 44, &key, &n, true, false, true, NULL) == AH_EINVALID,
	   "limits: a frame shorter than its MAC is refused");
	unsigned char *cap = capture(&key, &n, false, msgs, true, &rawlen);
	int sv[2];
	ah_rwire w;
	unsigned char *m = NULL;
	size_t len;
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	ok(write(sv[1], cap, rawlen) == (ssize_t)rawlen, "limits: stream written");
	ah_rwire_start(&w, sv[0], &key, &n, true);
	ok(ah_rwire_recv(&w, 10, ah_now_ms() + 1000, &m, &len, NULL) == AH_ETOOBIG,
	   "limits: a message over the receiver's cap is refused");
	ok(ah_rwire_recv(&w, 1 << 20, ah_now_ms() + 1000, &m, &len, NULL) != 0 && !m,
	   "limits: after a refusal the wire stays broken");
	ah_rwire_wipe(&w);
	close(sv[0]);
	close(sv[1]);
	free(cap);
}

int main(void)
{
	if (sodium_init() < 0)
		return 1;
	ah_rauth_key_derive(&key, SECRET, strlen(SECRET), NULL);
	ah_rauth_key_derive(&other, OTHER, strlen(OTHER), NULL);
	test_keys();
	test_layout();
	test_whole_connection();
	test_tampering();
	test_other_keys();
	test_order();
	test_limits();
	return tap_done();
}
