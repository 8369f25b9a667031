/* Unit test of lib/rpc/auth.c: the runner's TCP challenge-response.
 * Table-driven over the client's answer as the runner checks it, then the
 * runner's proof as the client checks it, then both whole handshakes over a
 * socketpair. TAP. */
#include "rpc/rpc.h"
#include "core/io.h"

#include <pthread.h>
#include <sodium.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tap.h"

#define SECRET "correct horse battery staple 0123456789"
#define OTHER "correct horse battery staple 0123456788"

/* How the answer the runner receives is made from an honest one. */
enum tamper { AS_IS, WRONG_KEY, REPLAYED, TRUNCATED, EMPTY, FLIPPED_MAC, FLIPPED_NONCE,
              UPPER_HEX, EXTRA_BYTE, NO_SPACE, NOT_HEX };

static const struct {
	const char *desc;
	enum tamper how;
	int accepted;
} answer_cases[] = {
	{"right secret", AS_IS, 1},
	{"upper-case hex of the right answer", UPPER_HEX, 1},
	{"wrong secret", WRONG_KEY, 0},
	{"answer replayed from an earlier challenge", REPLAYED, 0},
	{"truncated answer", TRUNCATED, 0},
	{"empty answer", EMPTY, 0},
	{"one MAC bit flipped", FLIPPED_MAC, 0},
	{"client nonce changed under its MAC", FLIPPED_NONCE, 0},
	{"one byte too many", EXTRA_BYTE, 0},
	{"separator missing", NO_SPACE, 0},
	{"not hex", NOT_HEX, 0},
};

static void flip_hex(char *c)
{
	*c = *c == '0' ? '1' : '0';
}

/* An answer to sn under the tampering; its length (no newline) into *len. */
static void make_answer(enum tamper how, const ah_rauth_key *key, const ah_rauth_key *other,
                        const unsigned char sn[AH_RAUTH_NONCE_BYTES], char *line, size_t *len)
{
	unsigned char cn[AH_RAUTH_NONCE_BYTES], old_sn[AH_RAUTH_NONCE_BYTES], esk[AH_RAUTH_NONCE_BYTES];
	char challenge[AH_RAUTH_LINE_MAX];
	ah_rauth_challenge(challenge, old_sn, esk); /* an earlier connection's challenge */
	*len = ah_rauth_answer(how == WRONG_KEY ? other : key, how == REPLAYED ? old_sn : sn, cn,
	                       line, esk) - 1;
	line[*len] = '\0';
	if (how == UPPER_HEX)
		for (size_t i = 0; i < *len; i++)
			line[i] = (char)(line[i] >= 'a' && line[i] <= 'f' ? line[i] - 32 : line[i]);
	if (how == TRUNCATED)
		*len -= 10;
	if (how == EMPTY)
		*len = 0;
	if (how == FLIPPED_MAC)
		flip_hex(&line[*len - 1]);
	if (how == FLIPPED_NONCE)
		flip_hex(&line[0]);
	if (how == EXTRA_BYTE)
		line[(*len)++] = '0';
	if (how == NO_SPACE)
		line[64] = '0';
	if (how == NOT_HEX)
		line[3] = 'g';
}

static void test_answers(const ah_rauth_key *key, const ah_rauth_key *other)
{
	for (size_t i = 0; i < sizeof(answer_cases) / sizeof(answer_cases[0]); i++) {
		unsigned char sn[AH_RAUTH_NONCE_BYTES], cn[AH_RAUTH_NONCE_BYTES], esk[AH_RAUTH_NONCE_BYTES];
		char challenge[AH_RAUTH_LINE_MAX], line[AH_RAUTH_LINE_MAX + 8];
		size_t len;
		ah_rauth_challenge(challenge, sn, esk);
		make_answer(answer_cases[i].how, key, other, sn, line, &len);
		int rc = ah_rauth_check_answer(key, sn, line, len, cn);
		ok((rc == 0) == (answer_cases[i].accepted != 0), "answer: %s is %s", answer_cases[i].desc,
		   answer_cases[i].accepted ? "accepted" : "refused");
	}
}

/* The client's side: a runner without the secret cannot pass as one. */
static void test_proofs(const ah_rauth_key *key, const ah_rauth_key *other)
{
	unsigned char sn[AH_RAUTH_NONCE_BYTES], cn[AH_RAUTH_NONCE_BYTES], cn2[AH_RAUTH_NONCE_BYTES];
	unsigned char ssk[AH_RAUTH_NONCE_BYTES], csk[AH_RAUTH_NONCE_BYTES];
	char c[AH_RAUTH_LINE_MAX], a[AH_RAUTH_LINE_MAX], p[AH_RAUTH_LINE_MAX];
	size_t cl = ah_rauth_challenge(c, sn, ssk) - 1;
	unsigned char parsed[AH_RAUTH_NONCE_BYTES];
	ok(ah_rauth_parse_challenge(c, cl, parsed) == 0 && memcmp(parsed, sn, sizeof sn) == 0,
	   "challenge: parses back to its nonce");
	ok(ah_rauth_parse_challenge(c, cl - 1, parsed) != 0, "challenge: truncated is refused");
	size_t al = ah_rauth_answer(key, sn, cn, a, csk) - 1;
	ok(ah_rauth_check_answer(key, sn, a, al, cn2) == 0 && memcmp(cn, cn2, sizeof cn) == 0,
	   "answer: the runner learns the client's nonce");
	size_t pl = ah_rauth_proof(key, sn, cn, p) - 1;
	ok(ah_rauth_check_proof(key, sn, cn, p, pl) == 0, "proof: right secret accepted");
	pl = ah_rauth_proof(other, sn, cn, p) - 1;
	ok(ah_rauth_check_proof(key, sn, cn, p, pl) != 0, "proof: wrong secret refused");
	pl = ah_rauth_proof(key, sn, cn, p) - 1;
	ok(ah_rauth_check_proof(key, sn, cn, p, pl - 1) != 0, "proof: truncated refused");
	ok(ah_rauth_check_proof(key, cn, sn, p, pl) != 0, "proof: nonces swapped refused");
	/* A client's answer reflected back as the runner's proof must not pass. */
	char reflected[AH_RAUTH_LINE_MAX + 16] = "AHRUNNER-OK ";
	memcpy(reflected + 12, a + 65, 64);
	ok(ah_rauth_check_proof(key, sn, cn, reflected, 76) != 0, "proof: reflected client MAC refused");

	/* The nonces are ephemeral X25519 keys: both ends agree on a secret that
	 * the shared key alone (all a recording plus a leaked secret gives) does
	 * not yield; a small-order key (all zeros) is refused. */
	unsigned char d1[AH_RAUTH_NONCE_BYTES], d2[AH_RAUTH_NONCE_BYTES], zero[AH_RAUTH_NONCE_BYTES] = {0};
	ok(ah_rauth_agree(d1, ssk, cn) == 0 && ah_rauth_agree(d2, csk, sn) == 0 &&
	   memcmp(d1, d2, sizeof d1) == 0, "agree: runner and client reach the same secret");
	ok(ah_rauth_agree(d1, ssk, zero) == AH_EDENIED, "agree: an all-zero peer key is refused");
}

static const struct {
	const char *desc, *secret;
	int accepted;
} secret_cases[] = {
	{"long secret", SECRET, 1},
	{"secret with a trailing newline", SECRET "\n", 1},
	{"16 bytes", "0123456789abcdef", 1},
	{"15 bytes", "0123456789abcde", 0},
	{"16 bytes of which 2 are a newline", "0123456789abcd\r\n", 0},
	{"empty", "", 0},
};

static void test_secrets(void)
{
	ah_rauth_key a, b;
	for (size_t i = 0; i < sizeof(secret_cases) / sizeof(secret_cases[0]); i++) {
		const char *s = secret_cases[i].secret;
		ok((ah_rauth_key_derive(&a, s, strlen(s), NULL) == 0) == (secret_cases[i].accepted != 0),
		   "secret: %s is %s", secret_cases[i].desc, secret_cases[i].accepted ? "usable" : "refused");
	}
	ah_rauth_key_derive(&a, SECRET, strlen(SECRET), NULL);
	ah_rauth_key_derive(&b, SECRET "\n", strlen(SECRET) + 1, NULL);
	ok(memcmp(a.k, b.k, sizeof a.k) == 0, "secret: a file's newline does not change the key");
}

struct side {
	int fd;
	const ah_rauth_key *key;
	int rc;
	ah_rauth_nonces n;
};

static void *server_side(void *arg)
{
	struct side *s = arg;
	s->rc = ah_rauth_server(s->fd, s->key, &s->n, NULL);
	return NULL;
}

static ah_rauth_nonces last_nonces; /* the client's side of the last handshake */

/* Both sides over a socketpair; the server side in a thread. */
static void handshake(const ah_rauth_key *server_key, const ah_rauth_key *client_key,
                      int *server_rc, int *client_rc, int *same_nonces)
{
	int sv[2];
	pthread_t t;
	ah_rauth_nonces n;
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	struct side s = {sv[0], server_key, -99, {{0}, {0}, {0}}};
	pthread_create(&t, NULL, server_side, &s);
	*client_rc = ah_rauth_client(sv[1], client_key, &n, NULL);
	close(sv[1]);
	pthread_join(t, NULL);
	close(sv[0]);
	*server_rc = s.rc;
	*same_nonces = memcmp(&n, &s.n, sizeof n) == 0;
	last_nonces = n;
}

static void test_handshakes(const ah_rauth_key *key, const ah_rauth_key *other)
{
	int srv, cli, same;
	handshake(key, key, &srv, &cli, &same);
	ok(srv == 0 && cli == 0, "handshake: same secret on both sides succeeds");
	ok(same, "handshake: both sides end with the same nonces and X25519 secret (the wire's keys)");
	ah_rauth_nonces first = last_nonces;
	handshake(key, key, &srv, &cli, &same);
	ok(srv == 0 && memcmp(first.dh, last_nonces.dh, sizeof first.dh) != 0,
	   "handshake: each connection agrees on a secret of its own");
	handshake(key, other, &srv, &cli, &same);
	ok(srv == AH_EDENIED && cli == AH_EDENIED, "handshake: different secrets fail on both sides");

	/* A client that skips the handshake gets a refusal line, not a request. */
	int sv[2];
	pthread_t t;
	char buf[256] = {0};
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	struct side s = {sv[0], key, -99, {{0}, {0}, {0}}};
	pthread_create(&t, NULL, server_side, &s);
	send(sv[1], "{\"op\":\"ping\"}\n", 14, MSG_NOSIGNAL);
	pthread_join(t, NULL);
	close(sv[0]);
	ssize_t n = read(sv[1], buf, sizeof buf - 1);
	n = n > 0 ? n : 0;
	ok(s.rc == AH_EDENIED && strstr(buf, "\"ok\":false") != NULL,
	   "handshake: a bare request is refused (%zd bytes back)", n);
	close(sv[1]);
}

static const struct {
	const char *in, *host, *port;
} addr_cases[] = {
	{"127.0.0.1:7400", "127.0.0.1", "7400"},
	{"runner-2.internal:7400", "runner-2.internal", "7400"},
	{"[::1]:7400", "::1", "7400"},
	{"0.0.0.0:0", "0.0.0.0", "0"},
	{"::1:7400", NULL, NULL},
	{"host", NULL, NULL},
	{"host:", NULL, NULL},
	{":7400", NULL, NULL},
	{"host:74a0", NULL, NULL},
	{"[::1]7400", NULL, NULL},
};

static void test_addresses(void)
{
	for (size_t i = 0; i < sizeof(addr_cases) / sizeof(addr_cases[0]); i++) {
		char h[64] = "", p[16] = "";
		int rc = ah_hostport_split(addr_cases[i].in, h, sizeof h, p, sizeof p);
		if (addr_cases[i].host)
			ok(rc == 0 && strcmp(h, addr_cases[i].host) == 0 && strcmp(p, addr_cases[i].port) == 0,
			   "address: %s splits into %s and %s", addr_cases[i].in, addr_cases[i].host,
			   addr_cases[i].port);
		else
			ok(rc != 0, "address: %s is refused", addr_cases[i].in);
	}
}

int main(void)
{
	ah_rauth_key key, other;
	if (sodium_init() < 0)
		return 1;
	ah_rauth_key_derive(&key, SECRET, strlen(SECRET), NULL);
	ah_rauth_key_derive(&other, OTHER, strlen(OTHER), NULL);
	test_answers(&key, &other);
	test_proofs(&key, &other);
	test_secrets();
	test_handshakes(&key, &other);
	test_addresses();
	return tap_done();
}
