/* See rpc/rpc.h: the handshake. */
#include "rpc/rpc.h"
#include "core/io.h"
#include "core/log.h"
#include "core/util.h"
#include "core/settings.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <sodium.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY_LABEL "agenthost-runner-secret-v1"
#define CHALLENGE_TAG "AHRUNNER-AUTH1 "
#define PROOF_TAG "AHRUNNER-OK "
#define HEX_LEN (AH_RAUTH_NONCE_BYTES * 2)
#define MAX_SECRET_FILE 4096
/* What a peer that failed gets: a protocol answer, so a client that skipped
 * the handshake sees why rather than just a closed connection. */
#define REFUSAL "{\"ok\":false,\"error\":\"authentication failed\"}\n"

_Static_assert(AH_RAUTH_MAC_BYTES == crypto_auth_BYTES, "HMAC-SHA512-256 tag size");
_Static_assert(AH_RAUTH_KEY_BYTES == crypto_auth_KEYBYTES, "HMAC-SHA512-256 key size");
_Static_assert(AH_RAUTH_NONCE_BYTES == AH_RAUTH_MAC_BYTES, "one hex width for both");
_Static_assert(AH_RAUTH_NONCE_BYTES == crypto_scalarmult_BYTES &&
               AH_RAUTH_NONCE_BYTES == crypto_scalarmult_SCALARBYTES, "X25519 keys as nonces");

/* ---- the key ---- */

int ah_rauth_key_derive(ah_rauth_key *key, const char *secret, size_t len, ah_err *err)
{
	while (len > 0 && (secret[len - 1] == '\n' || secret[len - 1] == '\r' ||
	                   secret[len - 1] == ' ' || secret[len - 1] == '\t'))
		len--;
	if (len < AH_RAUTH_MIN_SECRET)
		return ah_err_set(err, AH_EINVALID, "the runner secret is shorter than %d bytes",
		                  AH_RAUTH_MIN_SECRET);
	crypto_generichash(key->k, sizeof key->k, (const unsigned char *)secret, len,
	                   (const unsigned char *)KEY_LABEL, strlen(KEY_LABEL));
	return 0;
}

int ah_rauth_key_from_file(ah_rauth_key *key, const char *path, ah_err *err)
{
	char buf[MAX_SECRET_FILE];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return ah_err_set(err, AH_EFAIL, "runner_secret_file %s: %s", path, strerror(errno));
	int rc = AH_EFAIL;
	ssize_t n = -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		ah_err_set(err, AH_EFAIL, "runner_secret_file %s: not a regular file", path);
	else if (st.st_mode & (S_IROTH | S_IWOTH))
		ah_err_set(err, AH_EINVALID, "runner_secret_file %s: readable or writable by others "
		           "(chmod 0640 or stricter)", path);
	else if ((n = read(fd, buf, sizeof buf)) < 0 || (size_t)n == sizeof buf)
		ah_err_set(err, AH_EFAIL, "runner_secret_file %s: unreadable or too long", path);
	else
		rc = ah_rauth_key_derive(key, buf, (size_t)n, err);
	close(fd);
	sodium_memzero(buf, sizeof buf);
	return rc;
}

int ah_rauth_key_load(ah_rauth_key *key, const ah_config *cfg, ah_err *err)
{
	const char *secret = ah_settings_of(cfg)->runner.secret;
	const char *file = ah_settings_of(cfg)->runner.secret_file;
	if (*secret && *file)
		return ah_err_set(err, AH_EINVALID, "set runner_secret or runner_secret_file, not both");
	if (*file)
		return ah_rauth_key_from_file(key, file, err);
	if (*secret)
		return ah_rauth_key_derive(key, secret, strlen(secret), err);
	return ah_err_set(err, AH_ENOTFOUND, "no runner_secret or runner_secret_file configured");
}

/* ---- message steps ---- */

/* role | sn | cn: what both proofs authenticate. */
static size_t mac_input(unsigned char msg[32 + 2 * AH_RAUTH_NONCE_BYTES], const char *role,
                        const unsigned char sn[AH_RAUTH_NONCE_BYTES],
                        const unsigned char cn[AH_RAUTH_NONCE_BYTES])
{
	size_t rl = strlen(role);
	memcpy(msg, role, rl);
	memcpy(msg + rl, sn, AH_RAUTH_NONCE_BYTES);
	memcpy(msg + rl + AH_RAUTH_NONCE_BYTES, cn, AH_RAUTH_NONCE_BYTES);
	return rl + 2 * AH_RAUTH_NONCE_BYTES;
}

static void mac(unsigned char out[AH_RAUTH_MAC_BYTES], const ah_rauth_key *key, const char *role,
                const unsigned char sn[AH_RAUTH_NONCE_BYTES], const unsigned char cn[AH_RAUTH_NONCE_BYTES])
{
	unsigned char msg[32 + 2 * AH_RAUTH_NONCE_BYTES];
	crypto_auth(out, msg, mac_input(msg, role, sn, cn), key->k);
}

/* crypto_auth_verify compares in constant time. */
static bool mac_ok(const unsigned char tag[AH_RAUTH_MAC_BYTES], const ah_rauth_key *key,
                   const char *role, const unsigned char sn[AH_RAUTH_NONCE_BYTES],
                   const unsigned char cn[AH_RAUTH_NONCE_BYTES])
{
	unsigned char msg[32 + 2 * AH_RAUTH_NONCE_BYTES];
	return crypto_auth_verify(tag, msg, mac_input(msg, role, sn, cn), key->k) == 0;
}

/* Exactly HEX_LEN hex digits at s into 32 bytes. */
static bool unhex(unsigned char out[AH_RAUTH_NONCE_BYTES], const char *s, size_t len)
{
	size_t got = 0;
	const char *end = NULL;
	return len == HEX_LEN &&
	       sodium_hex2bin(out, AH_RAUTH_NONCE_BYTES, s, len, NULL, &got, &end) == 0 &&
	       got == AH_RAUTH_NONCE_BYTES && end == s + len;
}

/* tag, then hex of a, then optionally ' ' and hex of b, then '\n'. */
static size_t line_of(char out[AH_RAUTH_LINE_MAX], const char *tag, const unsigned char *a,
                      const unsigned char *b)
{
	size_t n = strlen(tag);
	memcpy(out, tag, n);
	sodium_bin2hex(out + n, HEX_LEN + 1, a, AH_RAUTH_NONCE_BYTES);
	n += HEX_LEN;
	if (b) {
		out[n++] = ' ';
		sodium_bin2hex(out + n, HEX_LEN + 1, b, AH_RAUTH_NONCE_BYTES);
		n += HEX_LEN;
	}
	out[n++] = '\n';
	out[n] = '\0';
	return n;
}

/* A fresh X25519 key pair: a public key is as unpredictable as a random nonce. */
static void key_pair(unsigned char pk[AH_RAUTH_NONCE_BYTES], unsigned char sk[AH_RAUTH_NONCE_BYTES])
{
	randombytes_buf(sk, AH_RAUTH_NONCE_BYTES);
	crypto_scalarmult_base(pk, sk);
}

int ah_rauth_agree(unsigned char dh[AH_RAUTH_NONCE_BYTES], const unsigned char esk[AH_RAUTH_NONCE_BYTES],
                   const unsigned char peer[AH_RAUTH_NONCE_BYTES])
{
	return crypto_scalarmult(dh, esk, peer) == 0 ? 0 : AH_EDENIED;
}

size_t ah_rauth_challenge(char out[AH_RAUTH_LINE_MAX], unsigned char sn[AH_RAUTH_NONCE_BYTES],
                          unsigned char esk[AH_RAUTH_NONCE_BYTES])
{
	key_pair(sn, esk);
	return line_of(out, CHALLENGE_TAG, sn, NULL);
}

int ah_rauth_parse_challenge(const char *line, size_t len, unsigned char sn[AH_RAUTH_NONCE_BYTES])
{
	size_t tl = strlen(CHALLENGE_TAG);
	if (len != tl + HEX_LEN || memcmp(line, CHALLENGE_TAG, tl) != 0 || !unhex(sn, line + tl, HEX_LEN))
		return AH_EINVALID;
	return 0;
}

size_t ah_rauth_answer(const ah_rauth_key *key, const unsigned char sn[AH_RAUTH_NONCE_BYTES],
                       unsigned char cn[AH_RAUTH_NONCE_BYTES], char out[AH_RAUTH_LINE_MAX],
                       unsigned char esk[AH_RAUTH_NONCE_BYTES])
{
	unsigned char tag[AH_RAUTH_MAC_BYTES];
	key_pair(cn, esk);
	mac(tag, key, "agenthost-runner client", sn, cn);
	return line_of(out, "", cn, tag);
}

int ah_rauth_check_answer(const ah_rauth_key *key, const unsigned char sn[AH_RAUTH_NONCE_BYTES],
                          const char *line, size_t len, unsigned char cn[AH_RAUTH_NONCE_BYTES])
{
	unsigned char tag[AH_RAUTH_MAC_BYTES];
	if (len != 2 * HEX_LEN + 1 || line[HEX_LEN] != ' ' || !unhex(cn, line, HEX_LEN) ||
	    !unhex(tag, line + HEX_LEN + 1, HEX_LEN))
		return AH_EDENIED;
	return mac_ok(tag, key, "agenthost-runner client", sn, cn) ? 0 : AH_EDENIED;
}

size_t ah_rauth_proof(const ah_rauth_key *key, const unsigned char sn[AH_RAUTH_NONCE_BYTES],
                      const unsigned char cn[AH_RAUTH_NONCE_BYTES], char out[AH_RAUTH_LINE_MAX])
{
	unsigned char tag[AH_RAUTH_MAC_BYTES];
	mac(tag, key, "agenthost-runner server", sn, cn);
	return line_of(out, PROOF_TAG, tag, NULL);
}

int ah_rauth_check_proof(const ah_rauth_key *key, const unsigned char sn[AH_RAUTH_NONCE_BYTES],
                         const unsigned char cn[AH_RAUTH_NONCE_BYTES], const char *line, size_t len)
{
	unsigned char tag[AH_RAUTH_MAC_BYTES];
	size_t tl = strlen(PROOF_TAG);
	if (len != tl + HEX_LEN || memcmp(line, PROOF_TAG, tl) != 0 || !unhex(tag, line + tl, HEX_LEN))
		return AH_EDENIED;
	return mac_ok(tag, key, "agenthost-runner server", sn, cn) ? 0 : AH_EDENIED;
}

/* ---- socket I/O ---- */

/* One line, byte by byte: what follows it (the request) must stay in the
 * socket for the caller. *len excludes the '\n'. AH_ETOOBIG when no newline
 * came within cap, AH_EFAIL on EOF or error. */
static int read_line(int fd, char *buf, size_t cap, int64_t deadline, size_t *len)
{
	size_t n = 0;
	for (;;) {
		ssize_t got = ah_read_until(fd, buf + n, 1, deadline);
		if (got == AH_ETIMEOUT)
			return AH_ETIMEOUT;
		if (got <= 0)
			return AH_EFAIL;
		if (buf[n] == '\n') {
			buf[n] = '\0';
			*len = n;
			return 0;
		}
		if (++n >= cap - 1)
			return AH_ETOOBIG;
	}
}

static int server_steps(int fd, const ah_rauth_key *key, ah_rauth_nonces *n,
                        unsigned char esk[AH_RAUTH_NONCE_BYTES], ah_err *err);

int ah_rauth_server(int fd, const ah_rauth_key *key, ah_rauth_nonces *n, ah_err *err)
{
	unsigned char esk[AH_RAUTH_NONCE_BYTES];
	int rc = server_steps(fd, key, n, esk, err);
	sodium_memzero(esk, sizeof esk);
	return rc;
}

static int server_steps(int fd, const ah_rauth_key *key, ah_rauth_nonces *n,
                        unsigned char esk[AH_RAUTH_NONCE_BYTES], ah_err *err)
{
	unsigned char *sn = n->sn, *cn = n->cn;
	char line[AH_RAUTH_LINE_MAX];
	size_t len = 0;
	int64_t deadline = ah_now_ms() + AH_RAUTH_TIMEOUT_MS;
	if (ah_send_all(fd, line, ah_rauth_challenge(line, sn, esk)) != 0)
		return ah_err_set(err, AH_EFAIL, "peer went away before the challenge");
	int rc = read_line(fd, line, sizeof line, deadline, &len);
	if (rc == AH_ETIMEOUT)
		return ah_err_set(err, AH_ETIMEOUT, "no answer within %d ms", AH_RAUTH_TIMEOUT_MS);
	if (rc == AH_EFAIL)
		return ah_err_set(err, AH_EFAIL, "peer closed the connection without answering");
	if (rc != 0 || ah_rauth_check_answer(key, sn, line, len, cn) != 0 ||
	    ah_rauth_agree(n->dh, esk, cn) != 0) {
		ah_send_all(fd, REFUSAL, strlen(REFUSAL));
		return ah_err_set(err, AH_EDENIED, rc != 0 ? "answer too long" :
		                  "wrong or malformed answer to the challenge");
	}
	if (ah_send_all(fd, line, ah_rauth_proof(key, sn, cn, line)) != 0)
		return ah_err_set(err, AH_EFAIL, "peer went away before the proof");
	return 0;
}

static int client_steps(int fd, const ah_rauth_key *key, ah_rauth_nonces *n,
                        unsigned char esk[AH_RAUTH_NONCE_BYTES], ah_err *err)
{
	unsigned char *sn = n->sn, *cn = n->cn;
	char line[AH_RAUTH_LINE_MAX];
	size_t len = 0;
	int64_t deadline = ah_now_ms() + AH_RAUTH_TIMEOUT_MS;
	int rc = read_line(fd, line, sizeof line, deadline, &len);
	/* Closed before its challenge: every handshake slot it gives this host
	 * was taken (lib/runner/handshakes.c). Nothing was sent: try again. */
	if (rc == AH_EFAIL)
		return ah_err_set(err, AH_EBUSY, "the runner closed the connection before its "
		                  "challenge (too many handshakes in flight)");
	if (rc != 0 || ah_rauth_parse_challenge(line, len, sn) != 0)
		return ah_err_set(err, rc == AH_ETIMEOUT ? AH_ETIMEOUT : AH_EFAIL,
		                  "the runner sent no challenge");
	if (ah_send_all(fd, line, ah_rauth_answer(key, sn, cn, line, esk)) != 0)
		return ah_err_set(err, AH_EFAIL, "the runner went away during the handshake");
	rc = read_line(fd, line, sizeof line, deadline, &len);
	if (rc != 0)
		return ah_err_set(err, rc == AH_ETIMEOUT ? AH_ETIMEOUT : AH_EFAIL,
		                  "the runner sent no proof");
	/* A refusal here means our secret differs from the runner's; anything else
	 * that fails is a runner that does not know the secret: no request for it. */
	if (ah_rauth_check_proof(key, sn, cn, line, len) != 0)
		return ah_err_set(err, AH_EDENIED, line[0] == '{' ? "the runner refused our secret" :
		                  "the runner could not prove the shared secret");
	if (ah_rauth_agree(n->dh, esk, sn) != 0)
		return ah_err_set(err, AH_EDENIED, "the runner sent an unusable key");
	return 0;
}

int ah_rauth_client(int fd, const ah_rauth_key *key, ah_rauth_nonces *n, ah_err *err)
{
	unsigned char esk[AH_RAUTH_NONCE_BYTES];
	int rc = client_steps(fd, key, n, esk, err);
	sodium_memzero(esk, sizeof esk);
	return rc;
}
