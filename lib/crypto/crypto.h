/* Secrets at rest and API-key hashing, all under one master key file.
 * Subkeys are derived from the master key (crypto_kdf) so that the key that
 * seals secrets never doubles as the key of the API-key hash or of URL MACs. */
#ifndef AH_CRYPTO_CRYPTO_H
#define AH_CRYPTO_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/config.h"
#include "core/err.h"

#define AH_NONCE_BYTES 24
#define AH_KEYHASH_BYTES 32

/* Loads `master_key_file` (default var/master.key). With create, a missing file
 * is made with 32 random bytes and mode 0600. */
int ah_crypto_init(const ah_config *cfg, int create, ah_err *err);

/* Seals plain with a fresh nonce; ciphertext from the arena. */
int ah_crypto_seal(ah_arena *a, unsigned char nonce[AH_NONCE_BYTES], unsigned char **ct,
                   size_t *ctlen, const void *plain, size_t len);
/* Opens; AH_EINVALID when the ciphertext does not authenticate. Result is
 * NUL-terminated for convenience. */
int ah_crypto_open(ah_arena *a, char **plain, size_t *len, const unsigned char *nonce,
                   const unsigned char *ct, size_t ctlen);

/* Keyed BLAKE2b of an API key. */
void ah_crypto_key_hash(unsigned char out[AH_KEYHASH_BYTES], const char *key, size_t len);

/* Capability URLs (presigned uploads): HMAC-SHA256 under a third subkey of
 * the master key, as 64 hex digits; the check is constant-time. */
#define AH_URL_MAC_HEX 65
void ah_crypto_url_mac(char hex[AH_URL_MAC_HEX], const char *msg);
bool ah_crypto_url_mac_ok(const char *hex, const char *msg);

/* A new API key "ahk_<8>_<10>"; *key_id gets the 8-character public part. */
char *ah_crypto_new_api_key(ah_arena *a, char **key_id);

#endif
