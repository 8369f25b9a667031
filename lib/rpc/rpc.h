/* The runner protocol (docs/architecture.md, "The runner protocol";
 * docs/runner-protocol.md): what the runner and the API workers both speak,
 * in the one module both link. Three parts:
 *   auth.c    the TCP handshake: the shared secret proved both ways
 *   frames.c  the sealed frames that follow it (and the client's dial)
 *   codes.c   the error codes an answer carries ("code"), so that neither
 *             side classifies the other's message text: messages are for people
 * and local.c, the id a host's runner goes by, which both sides work out.
 * Nothing here knows HTTP, the database or the runner's sandboxes. */
#ifndef AH_RPC_RPC_H
#define AH_RPC_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sodium.h>

#include "core/config.h"
#include "core/err.h"

/* ==== the handshake (auth.c), docs/runner-protocol.md, "TCP" ====
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
 * key and both nonces, keys the sealed messages that follow (frames, rpc/rpc.h): the
 * request and its answer never travel in clear, and someone who later learns
 * the shared secret still cannot open a recorded connection (forward secrecy),
 * while the MACs keep a man in the middle from substituting his own keys.
 *
 * The pure message steps are separate from the socket I/O so the unit test
 * (tests/unit/test_rpc_auth.c) can drive them without sockets. */
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
 * on, from which the frames derive the connection's keys. */
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
 * the sealed request may follow (frames, rpc/rpc.h). */
int ah_rauth_client(int fd, const ah_rauth_key *key, ah_rauth_nonces *n, ah_err *err);

/* ==== sealed frames (frames.c) ==== */
/* Sealed messages on an authenticated runner TCP connection
 * (docs/runner-protocol.md, "TCP"). The handshake proves the secret
 * but encrypts nothing, and requests carry agents' secrets and the model key;
 * so everything after it travels sealed.
 *
 * From the secret's key, both handshake nonces and their X25519 secret each direction gets its own
 * key (ah_rwire_keys), so nothing sealed on one connection, or in one
 * direction, opens on another. Each direction is one
 * crypto_secretstream_xchacha20poly1305 stream:
 *   header   24 bytes, once, just before the direction's first frame
 *   frame    len (4 bytes, big-endian) | ciphertext (len bytes, 17 of them
 *            the stream's tag and MAC), the 4 length bytes as additional data
 * secretstream numbers the frames itself, so a frame dropped, reordered or
 * replayed fails to open; the runner protocol's one message per direction is
 * tagged FINAL, so a stream cut short is told from a complete one. */
#define AH_RWIRE_KEY_BYTES crypto_secretstream_xchacha20poly1305_KEYBYTES
#define AH_RWIRE_HEADER_BYTES crypto_secretstream_xchacha20poly1305_HEADERBYTES
#define AH_RWIRE_OVERHEAD crypto_secretstream_xchacha20poly1305_ABYTES
/* Largest len a frame may announce: an answer carries a run's stdout as
 * base64 (10 MB by default, more when configured). */
#define AH_RWIRE_MAX_FRAME (64u << 20)

typedef struct ah_rwire {
	int fd;
	crypto_secretstream_xchacha20poly1305_state tx, rx;
	unsigned char tx_header[AH_RWIRE_HEADER_BYTES];
	unsigned char rx_key[AH_RWIRE_KEY_BYTES]; /* until the peer's header has come */
	bool header_sent, header_read;
	bool tx_ended, rx_ended; /* a FINAL frame went out / came in */
	bool broken;             /* a frame failed: nothing more is read */
} ah_rwire;

/* c2s = BLAKE2b-256("agenthost-runner wire client" | sn | cn | dh, key = key),
 * s2c the same with "agenthost-runner wire runner"; dh is the handshake's
 * X25519 secret, so the keys die with the connection (forward secrecy). */
void ah_rwire_keys(const ah_rauth_key *key, const ah_rauth_nonces *n,
                   unsigned char c2s[AH_RWIRE_KEY_BYTES], unsigned char s2c[AH_RWIRE_KEY_BYTES]);

/* Sets up both directions on fd after a successful handshake; runner_side
 * picks which key seals and which opens. Derived keys are wiped here. */
void ah_rwire_start(ah_rwire *w, int fd, const ah_rauth_key *key, const ah_rauth_nonces *n,
                    bool runner_side);

/* Seals msg into one frame (the header first, on the first call); last tags
 * it FINAL and ends the direction. AH_ETOOBIG over AH_RWIRE_MAX_FRAME,
 * AH_EFAIL when the peer went away. */
int ah_rwire_send(ah_rwire *w, const void *msg, size_t len, bool last, ah_err *err);

/* Opens the next frame, of at most cap plaintext bytes, by the deadline
 * (ah_now_ms() clock). *msg is malloc'ed and NUL-terminated; the caller frees
 * it (and wipes it first if it may hold secrets). Errors: AH_EDENIED when a
 * frame fails to open (tampered, replayed, reordered, other keys),
 * AH_ETOOBIG when it announces more than cap, AH_EFAIL when the stream ends
 * early or cut a frame short, AH_ETIMEOUT. After an error the wire is
 * broken: later calls fail too. */
int ah_rwire_recv(ah_rwire *w, size_t cap, int64_t deadline, unsigned char **msg, size_t *len,
                  ah_err *err);
/* The direction's one message: as ah_rwire_recv, and it must be FINAL. */
int ah_rwire_recv_last(ah_rwire *w, size_t cap, int64_t deadline, unsigned char **msg,
                       size_t *len, ah_err *err);

/* Wipes the stream states and any key left; does not close fd. */
void ah_rwire_wipe(ah_rwire *w);

/* ---- the client's whole call ---- */

/* Connects to "host:port" within 5 s, runs the handshake and starts the wire.
 * AH_EDENIED when either side's proof failed; AH_EBUSY when the runner had no
 * handshake slot for this host, after a few tries over about 0.3 s. On
 * failure nothing is open. */
int ah_rwire_dial(ah_rwire *w, const char *address, const ah_rauth_key *key, ah_err *err);
/* Sends req as the one FINAL request and reads the one FINAL answer within
 * timeout_ms (malloc'ed into *ans as ah_rwire_recv). */
int ah_rwire_exchange(ah_rwire *w, const char *req, size_t len, int timeout_ms,
                      unsigned char **ans, size_t *alen, ah_err *err);

/* ==== error codes on the wire (codes.c) ==== */

/* Every answer carries "ok"; a failed one also "code", one of these names,
 * and "error", a message for the person who made the call. A receiver
 * decides by the code alone. New codes may come: a receiver reads a name it
 * does not know as AH_RPC_FAILED. */
typedef enum ah_rpc_code {
	AH_RPC_OK = 0,      /* "ok" */
	AH_RPC_FAILED,      /* "failed": it did not work; the details are in the runner's log */
	AH_RPC_BUSY,        /* "busy": at capacity for now; "retry_after" says when to try again */
	AH_RPC_MOUNT,       /* "mount_failed": a bucket mount failed; the message names the
	                     * mount and the bucket (never a credential) and is the user's */
	AH_RPC_INVALID,     /* "invalid": the request itself was refused (a field, the op) */
	AH_RPC_ELSEWHERE,   /* "wrong_runner": meant for another runner */
	AH_RPC_OVERLOADED,  /* "overloaded": no connection thread free for it */
	AH_RPC_CODE_COUNT
} ah_rpc_code;

/* The code's name on the wire ("failed" for one out of range). */
const char *ah_rpc_code_name(ah_rpc_code c);
/* A name from the wire: NULL (absent) is AH_RPC_OK when ok else AH_RPC_FAILED;
 * a name not known here AH_RPC_FAILED. */
ah_rpc_code ah_rpc_code_parse(const char *name, bool ok);
/* The code for a failed operation's status (core/err.h): AH_EBUSY busy,
 * AH_EMOUNT mount_failed, AH_EINVALID invalid, anything else failed. */
ah_rpc_code ah_rpc_code_of(int rc);

/* ==== this host's runner (local.c) ==== */

/* This host's runner id: what the runner on runner_socket registers as, and
 * how an API worker knows an agent's runner is that one. -1 when
 * runner_socket's directory does not exist (yet): the id is then computed
 * from the path as configured and may not be the runner's. */
int ah_runner_local_id(const ah_config *cfg, char *out, size_t n);

#endif
