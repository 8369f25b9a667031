/* The runner's TCP handshake (docs/runner-protocol.md, "TCP"), shared by the
 * runner (server side) and the API workers (client side).
 *
 * Both sides hold a 32-byte key derived from the shared secret; the secret
 * itself never crosses the wire. Mutual challenge-response:
 *   runner → client  "AHRUNNER-AUTH1 <sn>"        sn: runner's ephemeral X25519 public key, hex
 *   client → runner  "<cn> <mac_c>"                cn: client's ephemeral X25519 public key, hex
 *   runner → client  "AHRUNNER-OK <mac_s>"
 * mac_c = HMAC-SHA512-256(key, "agenthost-runner client" | sn | cn) and mac_s
 * the same with "server": the role labels stop one side's proof from being
 * reflected as the other's, and the runner's fresh sn makes every answer good
 * for one connection only. The two ephemeral keys (fresh key pairs, used once,
 * wiped after the handshake) agree on an X25519 secret that, with the shared
 * key and both nonces, keys the sealed messages that follow (wire.h): the
 * request and its answer never travel in clear, and someone who later learns
 * the shared secret still cannot open a recorded connection (forward secrecy),
 * while the MACs keep a man in the middle from substituting his own keys.
 *
 * The pure message steps are separate from the socket I/O so the unit test
 * (tests/unit/test_runner_auth.c) can drive them without sockets. */
#ifndef AH_RUNNER_CLIENT_AUTH_H
#define AH_RUNNER_CLIENT_AUTH_H

#include <stddef.h>

#include "core/config.h"
#include "core/err.h"

#define AH_RAUTH_NONCE_BYTES 32
#define AH_RAUTH_KEY_BYTES 32
#define AH_RAUTH_MAC_BYTES 32
#define AH_RAUTH_MIN_SECRET 16   /* bytes; a generated secret is 44 */
#define AH_RAUTH_LINE_MAX 160    /* longest handshake line, newline included */
#define AH_RAUTH_TIMEOUT_MS 5000

typedef struct ah_rauth_key {
	unsigned char k[AH_RAUTH_KEY_BYTES];
} ah_rauth_key;

/* What a successful handshake leaves both sides: the runner's and the
 * client's nonce (ephemeral public keys) and the X25519 secret they agreed
 * on, from which wire.h derives the connection's keys. */
typedef struct ah_rauth_nonces {
	unsigned char sn[AH_RAUTH_NONCE_BYTES];
	unsigned char cn[AH_RAUTH_NONCE_BYTES];
	unsigned char dh[AH_RAUTH_NONCE_BYTES];
} ah_rauth_nonces;

/* key = BLAKE2b-256 of the secret, keyed with a fixed label. The secret's
 * trailing whitespace (a file's newline) is not part of it. AH_EINVALID when
 * it is shorter than AH_RAUTH_MIN_SECRET. */
int ah_rauth_key_derive(ah_rauth_key *key, const char *secret, size_t len, ah_err *err);

/* From runner_secret or runner_secret_file (exactly one may be set).
 * AH_ENOTFOUND when neither is: TCP is then refused. */
int ah_rauth_key_load(ah_rauth_key *key, const ah_config *cfg, ah_err *err);
/* From a secret file alone (not readable by others, as runner_secret_file). */
int ah_rauth_key_from_file(ah_rauth_key *key, const char *path, ah_err *err);

/* ---- message steps: lines without their '\n'; out gets one with it ---- */

/* A fresh key pair (sn public, esk secret) and the challenge line; returns
 * the line's length. */
size_t ah_rauth_challenge(char out[AH_RAUTH_LINE_MAX], unsigned char sn[AH_RAUTH_NONCE_BYTES],
                          unsigned char esk[AH_RAUTH_NONCE_BYTES]);
int ah_rauth_parse_challenge(const char *line, size_t len, unsigned char sn[AH_RAUTH_NONCE_BYTES]);
/* A fresh key pair (cn public, esk secret) and the answer line to sn;
 * returns the line's length. */
size_t ah_rauth_answer(const ah_rauth_key *key, const unsigned char sn[AH_RAUTH_NONCE_BYTES],
                       unsigned char cn[AH_RAUTH_NONCE_BYTES], char out[AH_RAUTH_LINE_MAX],
                       unsigned char esk[AH_RAUTH_NONCE_BYTES]);
/* The X25519 secret of one's own esk and the peer's public key, into dh;
 * AH_EDENIED for a peer key of small order (an all-zero secret). */
int ah_rauth_agree(unsigned char dh[AH_RAUTH_NONCE_BYTES], const unsigned char esk[AH_RAUTH_NONCE_BYTES],
                   const unsigned char peer[AH_RAUTH_NONCE_BYTES]);
/* 0 and the client's cn when line answers sn under key; else AH_EDENIED. */
int ah_rauth_check_answer(const ah_rauth_key *key, const unsigned char sn[AH_RAUTH_NONCE_BYTES],
                          const char *line, size_t len, unsigned char cn[AH_RAUTH_NONCE_BYTES]);
size_t ah_rauth_proof(const ah_rauth_key *key, const unsigned char sn[AH_RAUTH_NONCE_BYTES],
                      const unsigned char cn[AH_RAUTH_NONCE_BYTES], char out[AH_RAUTH_LINE_MAX]);
int ah_rauth_check_proof(const ah_rauth_key *key, const unsigned char sn[AH_RAUTH_NONCE_BYTES],
                         const unsigned char cn[AH_RAUTH_NONCE_BYTES], const char *line, size_t len);

/* ---- whole handshakes on a connected socket, within AH_RAUTH_TIMEOUT_MS ---- */

/* Runner side. 0: the peer knows the secret, and *n holds both nonces.
 * AH_EDENIED: it does not (the refusal line has been sent); AH_ETIMEOUT /
 * AH_EFAIL: it went away or stalled. err says why, never with key material. */
int ah_rauth_server(int fd, const ah_rauth_key *key, ah_rauth_nonces *n, ah_err *err);
/* Client side. 0: the runner proved the secret too, *n holds both nonces and
 * the sealed request may follow (wire.h). */
int ah_rauth_client(int fd, const ah_rauth_key *key, ah_rauth_nonces *n, ah_err *err);

#endif
