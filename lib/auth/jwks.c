/* JSON Web Key Sets: parsing keys into verifiers and signature checks
 * (fetching and caching them: jwks_cache.c).
 *
 * RSA and ECDSA go through OpenSSL's libcrypto, the well-kept library for them;
 * Ed25519 goes through libsodium like the rest of the project's cryptography.
 * Each key is bound to the one algorithm its type implies, so a key is never used
 * with an algorithm the identity provider did not mean it for. */
#include "auth/jwt.h"
#include "core/json.h"
#include "core/log.h"
#include "core/util.h"

#include <json-c/json.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEYS 64

struct jwk {
	char kid[257];       /* "" when the key has none */
	ah_jwt_alg alg;
	EVP_PKEY *pkey;      /* RS256, ES256 */
	unsigned char ed[crypto_sign_PUBLICKEYBYTES]; /* EdDSA */
};

struct ah_jwks {
	struct jwk keys[MAX_KEYS];
	size_t n;
};

static int b64url(unsigned char *out, size_t cap, size_t *outlen, const char *s)
{
	const char *end = NULL;
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || sodium_base642bin(out, cap, s, n, NULL, outlen, &end,
	                                sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 || end != s + n)
		return AH_EINVALID;
	return 0;
}

static EVP_PKEY *pkey_from_params(const char *type, const OSSL_PARAM *params)
{
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
	EVP_PKEY *pk = NULL;
	if (!ctx || EVP_PKEY_fromdata_init(ctx) <= 0 ||
	    EVP_PKEY_fromdata(ctx, &pk, EVP_PKEY_PUBLIC_KEY, (OSSL_PARAM *)params) <= 0)
		pk = NULL;
	EVP_PKEY_CTX_free(ctx);
	return pk;
}

/* RSA below 2048 bits is refused: such keys are breakable and no provider needs them. */
static EVP_PKEY *rsa_key(json_object *o)
{
	unsigned char n[1024], e[16];
	size_t nlen, elen;
	if (b64url(n, sizeof(n), &nlen, ah_json_get_str(o, "n")) != 0 ||
	    b64url(e, sizeof(e), &elen, ah_json_get_str(o, "e")) != 0)
		return NULL;
	BIGNUM *bn = BN_bin2bn(n, (int)nlen, NULL), *be = BN_bin2bn(e, (int)elen, NULL);
	OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
	OSSL_PARAM *params = NULL;
	EVP_PKEY *pk = NULL;
	if (bn && be && bld && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be) &&
	    (params = OSSL_PARAM_BLD_to_param(bld)) != NULL)
		pk = pkey_from_params("RSA", params);
	if (pk && EVP_PKEY_get_bits(pk) < 2048) {
		EVP_PKEY_free(pk);
		pk = NULL;
	}
	OSSL_PARAM_free(params);
	OSSL_PARAM_BLD_free(bld);
	BN_free(bn);
	BN_free(be);
	return pk;
}

/* P-256 only; the point must lie on the curve (invalid-curve attacks). */
static EVP_PKEY *ec_key(json_object *o)
{
	unsigned char pub[65] = {0x04};
	size_t xlen, ylen;
	const char *crv = ah_json_get_str(o, "crv");
	if (!crv || strcmp(crv, "P-256") != 0 ||
	    b64url(pub + 1, 32, &xlen, ah_json_get_str(o, "x")) != 0 || xlen != 32 ||
	    b64url(pub + 33, 32, &ylen, ah_json_get_str(o, "y")) != 0 || ylen != 32)
		return NULL;
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)"prime256v1", 0),
		OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, pub, sizeof(pub)),
		OSSL_PARAM_construct_end(),
	};
	EVP_PKEY *pk = pkey_from_params("EC", params);
	EVP_PKEY_CTX *ctx = pk ? EVP_PKEY_CTX_new_from_pkey(NULL, pk, NULL) : NULL;
	if (pk && (!ctx || EVP_PKEY_public_check(ctx) != 1)) {
		EVP_PKEY_free(pk);
		pk = NULL;
	}
	EVP_PKEY_CTX_free(ctx);
	return pk;
}

static bool ed25519_key(struct jwk *k, json_object *o)
{
	size_t len;
	const char *crv = ah_json_get_str(o, "crv");
	return crv && strcmp(crv, "Ed25519") == 0 &&
	       b64url(k->ed, sizeof(k->ed), &len, ah_json_get_str(o, "x")) == 0 && len == sizeof(k->ed);
}

static const char *alg_name(ah_jwt_alg alg)
{
	return alg == AH_JWT_RS256 ? "RS256" : alg == AH_JWT_ES256 ? "ES256" : "EdDSA";
}

/* Fills k from one JWK; false for a key we cannot or must not use. */
static bool load_key(struct jwk *k, json_object *o)
{
	const char *kty = ah_json_get_str(o, "kty"), *use = ah_json_get_str(o, "use");
	const char *alg = ah_json_get_str(o, "alg"), *kid = ah_json_get_str(o, "kid");
	if (!kty || (use && strcmp(use, "sig") != 0) || (kid && strlen(kid) >= sizeof(k->kid)))
		return false;
	memset(k, 0, sizeof(*k));
	if (strcmp(kty, "RSA") == 0 && (k->pkey = rsa_key(o)) != NULL)
		k->alg = AH_JWT_RS256;
	else if (strcmp(kty, "EC") == 0 && (k->pkey = ec_key(o)) != NULL)
		k->alg = AH_JWT_ES256;
	else if (strcmp(kty, "OKP") == 0 && ed25519_key(k, o))
		k->alg = AH_JWT_EDDSA;
	else
		return false; /* "oct" included: a key set never supplies HMAC secrets */
	if (alg && strcmp(alg, alg_name(k->alg)) != 0) {
		EVP_PKEY_free(k->pkey);
		return false;
	}
	if (kid)
		memcpy(k->kid, kid, strlen(kid) + 1);
	return true;
}

int ah_jwks_parse(ah_jwks **out, const char *json, size_t len, ah_err *err)
{
	*out = NULL;
	json_tokener *t = json_tokener_new_ex(16);
	json_object *doc = t ? json_tokener_parse_ex(t, json, (int)len) : NULL, *keys;
	if (t)
		json_tokener_free(t);
	if (!doc || !json_object_object_get_ex(doc, "keys", &keys) ||
	    !json_object_is_type(keys, json_type_array)) {
		json_object_put(doc);
		return ah_err_set(err, AH_EINVALID, "not a JWK set");
	}
	ah_jwks *k = calloc(1, sizeof(*k));
	if (!k) {
		json_object_put(doc);
		return ah_err_set(err, AH_EFAIL, "out of memory");
	}
	for (size_t i = 0; i < json_object_array_length(keys) && k->n < MAX_KEYS; i++) {
		json_object *o = json_object_array_get_idx(keys, i);
		if (json_object_is_type(o, json_type_object) && load_key(&k->keys[k->n], o))
			k->n++;
	}
	json_object_put(doc);
	*out = k;
	return 0;
}

void ah_jwks_free(ah_jwks *k)
{
	for (size_t i = 0; k && i < k->n; i++)
		EVP_PKEY_free(k->keys[i].pkey);
	free(k);
}

size_t ah_jwks_count(const ah_jwks *k)
{
	return k ? k->n : 0;
}

/* JWS carries ECDSA signatures as r || s (32 bytes each); OpenSSL wants DER. */
static unsigned char *es256_der(const unsigned char *sig, size_t siglen, int *derlen)
{
	unsigned char *der = NULL;
	*derlen = 0;
	if (siglen != 64)
		return NULL;
	ECDSA_SIG *es = ECDSA_SIG_new();
	BIGNUM *r = BN_bin2bn(sig, 32, NULL), *s = BN_bin2bn(sig + 32, 32, NULL);
	if (es && r && s && ECDSA_SIG_set0(es, r, s) == 1) {
		r = s = NULL; /* owned by es now */
		*derlen = i2d_ECDSA_SIG(es, &der);
	}
	BN_free(r);
	BN_free(s);
	ECDSA_SIG_free(es);
	return *derlen > 0 ? der : NULL;
}

static int verify_evp(const struct jwk *k, const unsigned char *msg, size_t len,
                      const unsigned char *sig, size_t siglen)
{
	unsigned char *der = NULL;
	int derlen = 0;
	if (k->alg == AH_JWT_ES256) {
		if (!(der = es256_der(sig, siglen, &derlen)))
			return AH_EDENIED;
		sig = der;
		siglen = (size_t)derlen;
	} else if (siglen != (size_t)EVP_PKEY_get_size(k->pkey)) {
		return AH_EDENIED;
	}
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	int ok = md && EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, k->pkey) == 1 &&
	         EVP_DigestVerify(md, sig, siglen, msg, len) == 1;
	EVP_MD_CTX_free(md);
	OPENSSL_free(der);
	return ok ? 0 : AH_EDENIED;
}

static int verify_one(const struct jwk *k, const unsigned char *msg, size_t len,
                      const unsigned char *sig, size_t siglen)
{
	if (k->alg == AH_JWT_EDDSA)
		return siglen == crypto_sign_BYTES &&
		       crypto_sign_verify_detached(sig, msg, len, k->ed) == 0 ? 0 : AH_EDENIED;
	return verify_evp(k, msg, len, sig, siglen);
}

int ah_jwks_verify(const ah_jwks *k, const char *kid, ah_jwt_alg alg, const unsigned char *msg,
                   size_t len, const unsigned char *sig, size_t siglen)
{
	bool named = false;
	for (size_t i = 0; k && alg != AH_JWT_HS256 && i < k->n; i++) {
		if (kid && strcmp(k->keys[i].kid, kid) != 0)
			continue;
		named = true;
		/* The header's alg must be the one this key is for (no confusion). */
		if (k->keys[i].alg == alg && verify_one(&k->keys[i], msg, len, sig, siglen) == 0)
			return 0;
		if (kid)
			return AH_EDENIED;
	}
	return kid && !named ? AH_ENOTFOUND : AH_EDENIED;
}
