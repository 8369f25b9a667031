/* Sealed messages on an authenticated runner TCP connection
 * (docs/runner-protocol.md, "TCP"). The handshake of auth.h proves the secret
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
#ifndef AH_RUNNER_CLIENT_WIRE_H
#define AH_RUNNER_CLIENT_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sodium.h>

#include "runner_client/auth.h"

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

#endif
