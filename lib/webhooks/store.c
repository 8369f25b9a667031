/* The API side's rows: the user's signing secret (sealed under the master
 * key as agent secrets are) and the enqueue of a delivery. */
#include "webhooks/webhooks.h"
#include "crypto/crypto.h"
#include "core/util.h"
#include "db/enums.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#define SECRET_RANDOM_BYTES 32

static const char SQL_SECRET_PUT[] =
	"INSERT INTO webhook_secrets (user_id, nonce, ciphertext, created_at) VALUES (?, ?, ?, NOW(3))"
	" ON DUPLICATE KEY UPDATE nonce = VALUES(nonce), ciphertext = VALUES(ciphertext),"
	" created_at = VALUES(created_at)";
static const char SQL_SECRET_GET[] =
	"SELECT nonce, ciphertext FROM webhook_secrets WHERE user_id = ?";
static const char SQL_SECRET_EXISTS[] = "SELECT 1 FROM webhook_secrets WHERE user_id = ?";
static const char SQL_ENQUEUE[] =
	"INSERT INTO webhook_deliveries (id, user_id, agent_id, invocation_id, url, payload, state,"
	" next_attempt_at, created_at, updated_at)"
	" VALUES (?, ?, ?, ?, ?, ?, " AH_SQ(AH_DELIVERY_S_PENDING) ", NOW(3), NOW(3), NOW(3))";

void ah_webhook_sign(char hex[AH_WEBHOOK_SIG_HEX], const char *secret, int64_t t,
                     const char *body, size_t len)
{
	crypto_auth_hmacsha256_state st;
	unsigned char mac[crypto_auth_hmacsha256_BYTES];
	char ts[24];
	int n = snprintf(ts, sizeof(ts), "%lld.", (long long)t);
	crypto_auth_hmacsha256_init(&st, (const unsigned char *)secret, strlen(secret));
	crypto_auth_hmacsha256_update(&st, (const unsigned char *)ts, (unsigned long long)n);
	crypto_auth_hmacsha256_update(&st, (const unsigned char *)body, len);
	crypto_auth_hmacsha256_final(&st, mac);
	sodium_bin2hex(hex, AH_WEBHOOK_SIG_HEX, mac, sizeof(mac));
	sodium_memzero(&st, sizeof(st));
}

int ah_webhook_secret_rotate(ah_db *db, ah_arena *a, const char *user_id, const char **out,
                             ah_err *err)
{
	unsigned char raw[SECRET_RANDOM_BYTES], nonce[AH_NONCE_BYTES], *ct;
	size_t ctlen, cap = sodium_base64_ENCODED_LEN(sizeof(raw), sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	char *text = ah_alloc(a, cap + 6);
	randombytes_buf(raw, sizeof(raw));
	memcpy(text, "whsec_", 6);
	sodium_bin2base64(text + 6, cap, raw, sizeof(raw), sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	sodium_memzero(raw, sizeof(raw));
	if (ah_crypto_seal(a, nonce, &ct, &ctlen, text, strlen(text)) != 0)
		return ah_err_set(err, AH_EFAIL, "cannot seal the webhook secret");
	if (ah_db_exec(db, NULL, SQL_SECRET_PUT, "sbb", user_id, nonce, sizeof(nonce), ct, ctlen) != 0)
		return ah_err_set(err, AH_EFAIL, "%s", ah_db_error(db));
	*out = text;
	return 0;
}

int ah_webhook_secret_get(ah_db *db, ah_arena *a, const char *user_id, const char **out,
                          ah_err *err)
{
	ah_rows rows;
	char *plain;
	size_t len;
	if (ah_db_query(db, a, &rows, SQL_SECRET_GET, "s", user_id) != 0)
		return ah_err_set(err, AH_EFAIL, "%s", ah_db_error(db));
	if (rows.n == 0)
		return ah_err_set(err, AH_ENOTFOUND, "no webhook signing secret");
	if (rows.len[0][0] != AH_NONCE_BYTES ||
	    ah_crypto_open(a, &plain, &len, (const unsigned char *)rows.v[0][0],
	                   (const unsigned char *)rows.v[0][1], rows.len[0][1]) != 0)
		return ah_err_set(err, AH_EFAIL, "the webhook signing secret does not decrypt");
	*out = plain;
	return 0;
}

int ah_webhook_secret_exists(ah_db *db, ah_arena *a, const char *user_id)
{
	ah_rows rows;
	if (ah_db_query(db, a, &rows, SQL_SECRET_EXISTS, "s", user_id) != 0)
		return AH_EFAIL;
	return rows.n ? 0 : AH_ENOTFOUND;
}

int ah_webhook_enqueue(ah_db *db, ah_arena *a, const char *user_id, const char *agent_id,
                       const char *invocation_id, const char *url, const char *payload,
                       size_t len, const char **id_out, ah_err *err)
{
	const char *id = ah_id_new(a, "whd");
	if (ah_db_exec(db, NULL, SQL_ENQUEUE, "sssssb", id, user_id, agent_id, invocation_id, url,
	               payload, len) != 0)
		return ah_err_set(err, AH_EFAIL, "%s", ah_db_error(db));
	if (id_out)
		*id_out = id;
	return 0;
}
