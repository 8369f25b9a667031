/* See crypto.h. */
#include "crypto/crypto.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned char seal_key[crypto_secretbox_KEYBYTES];
static unsigned char hash_key[crypto_generichash_KEYBYTES];
static unsigned char url_key[crypto_auth_hmacsha256_KEYBYTES];
static int ready;

static int read_key(const char *path, unsigned char *master, ah_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ah_err_set(err, errno == ENOENT ? AH_ENOTFOUND : AH_EFAIL,
		                  "cannot open master key %s: %s", path, strerror(errno));
	ssize_t n = read(fd, master, crypto_kdf_KEYBYTES);
	close(fd);
	if (n != crypto_kdf_KEYBYTES)
		return ah_err_set(err, AH_EINVALID, "master key %s must hold %d bytes", path,
		                  crypto_kdf_KEYBYTES);
	return 0;
}

static int create_key(const char *path, ah_err *err)
{
	unsigned char master[crypto_kdf_KEYBYTES];
	crypto_kdf_keygen(master);
	/* O_EXCL: two processes starting at once must not both write a key. */
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno == EEXIST ? 0 : ah_err_set(err, AH_EFAIL, "cannot create %s: %s", path,
		                                        strerror(errno));
	ssize_t n = write(fd, master, sizeof(master));
	sodium_memzero(master, sizeof(master));
	if (n != (ssize_t)sizeof(master) || fsync(fd) != 0) {
		close(fd);
		unlink(path);
		return ah_err_set(err, AH_EFAIL, "cannot write %s", path);
	}
	close(fd);
	return 0;
}

int ah_crypto_init(const ah_config *cfg, int create, ah_err *err)
{
	if (sodium_init() < 0)
		return ah_err_set(err, AH_EFAIL, "libsodium failed to initialise");
	const char *path = ah_settings_of(cfg)->host.master_key_file;
	unsigned char master[crypto_kdf_KEYBYTES];
	int rc = read_key(path, master, err);
	if (rc == AH_ENOTFOUND && create) {
		if ((rc = create_key(path, err)) != 0)
			return rc;
		rc = read_key(path, master, err);
	}
	if (rc != 0)
		return rc;
	crypto_kdf_derive_from_key(seal_key, sizeof(seal_key), 1, "agenthst", master);
	crypto_kdf_derive_from_key(hash_key, sizeof(hash_key), 2, "agenthst", master);
	crypto_kdf_derive_from_key(url_key, sizeof(url_key), 3, "agenthst", master);
	sodium_memzero(master, sizeof(master));
	ready = 1;
	return 0;
}

int ah_crypto_seal(ah_arena *a, unsigned char nonce[AH_NONCE_BYTES], unsigned char **ct,
                   size_t *ctlen, const void *plain, size_t len)
{
	if (!ready)
		return AH_EFAIL;
	randombytes_buf(nonce, AH_NONCE_BYTES);
	*ctlen = len + crypto_secretbox_MACBYTES;
	*ct = ah_alloc(a, *ctlen);
	crypto_secretbox_easy(*ct, plain, len, nonce, seal_key);
	return 0;
}

int ah_crypto_open(ah_arena *a, char **plain, size_t *len, const unsigned char *nonce,
                   const unsigned char *ct, size_t ctlen)
{
	if (!ready || ctlen < crypto_secretbox_MACBYTES)
		return AH_EINVALID;
	*len = ctlen - crypto_secretbox_MACBYTES;
	*plain = ah_alloc(a, *len + 1);
	if (crypto_secretbox_open_easy((unsigned char *)*plain, ct, ctlen, nonce, seal_key) != 0)
		return AH_EINVALID;
	return 0;
}

void ah_crypto_key_hash(unsigned char out[AH_KEYHASH_BYTES], const char *key, size_t len)
{
	crypto_generichash(out, AH_KEYHASH_BYTES, (const unsigned char *)key, len, hash_key,
	                   sizeof(hash_key));
}

char *ah_crypto_new_api_key(ah_arena *a, char **key_id)
{
	char id[9], secret[11];
	ah_base62_random(id, 8);
	ah_base62_random(secret, 10);
	*key_id = ah_strdup(a, id);
	return ah_sprintf(a, "ahk_%s_%s", id, secret);
}

void ah_crypto_url_mac(char hex[AH_URL_MAC_HEX], const char *msg)
{
	unsigned char mac[crypto_auth_hmacsha256_BYTES];
	crypto_auth_hmacsha256(mac, (const unsigned char *)msg, strlen(msg), url_key);
	sodium_bin2hex(hex, AH_URL_MAC_HEX, mac, sizeof(mac));
}

bool ah_crypto_url_mac_ok(const char *hex, const char *msg)
{
	char want[AH_URL_MAC_HEX];
	if (!ready || strlen(hex) != AH_URL_MAC_HEX - 1)
		return false;
	ah_crypto_url_mac(want, msg);
	return sodium_memcmp(want, hex, AH_URL_MAC_HEX - 1) == 0;
}
