/* Unit test of lib/auth/jwt.c and jwks.c: tokens signed here (HS256 with
 * libsodium, Ed25519 with libsodium, RS256 and ES256 with keys OpenSSL generates
 * at start) are checked against a key set built from those keys. One row per
 * case; the policy's clock is fixed, so the times in the rows are absolute. TAP. */
#include "auth/jwt.h"

#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "tap.h"

#define NOW 1800000000LL
#define SECRET "0123456789abcdef0123456789abcdef-test-secret"
#define CLAIMS "{\"iss\":\"https://idp.test\",\"aud\":\"agenthost\",\"sub\":\"user-1\"," \
               "\"email\":\"a@b.test\",\"iat\":1799999990,\"exp\":1800000600}"

static EVP_PKEY *rsa, *rsa2, *ec, *ec2;
static unsigned char ed_pk[32], ed_sk[64], ed2_pk[32], ed2_sk[64];
static ah_jwks *keys;
static char rsa_pub_der_b64[1024]; /* for the alg-confusion row */

enum signer { S_NONE, S_HS, S_HS_WRONG, S_HS_RSA_PUB, S_RSA, S_RSA2, S_EC, S_EC2, S_ED, S_ED2 };
enum policy { P_BOTH, P_JWKS_ONLY, P_HS_ONLY, P_OPEN };

static const char *b64(char *out, size_t cap, const void *b, size_t n)
{
	return sodium_bin2base64(out, cap, b, n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

static size_t sign_evp(unsigned char *sig, EVP_PKEY *pk, const char *msg, size_t len)
{
	unsigned char der[600];
	size_t n = sizeof(der);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, pk);
	EVP_DigestSign(md, der, &n, (const unsigned char *)msg, len);
	EVP_MD_CTX_free(md);
	if (EVP_PKEY_get_base_id(pk) == EVP_PKEY_RSA) {
		memcpy(sig, der, n);
		return n;
	}
	/* ECDSA: DER → r || s, as JWS wants it */
	const unsigned char *p = der;
	ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)n);
	BN_bn2binpad(ECDSA_SIG_get0_r(es), sig, 32);
	BN_bn2binpad(ECDSA_SIG_get0_s(es), sig + 32, 32);
	ECDSA_SIG_free(es);
	return 64;
}

static size_t sign_hs(unsigned char *sig, const char *key, const char *msg, size_t len)
{
	crypto_auth_hmacsha256_state st;
	crypto_auth_hmacsha256_init(&st, (const unsigned char *)key, strlen(key));
	crypto_auth_hmacsha256_update(&st, (const unsigned char *)msg, len);
	crypto_auth_hmacsha256_final(&st, sig);
	return 32;
}

static size_t sign(unsigned char *sig, enum signer s, const char *msg, size_t len)
{
	const unsigned char *m = (const unsigned char *)msg;
	switch (s) {
	case S_HS: return sign_hs(sig, SECRET, msg, len);
	case S_HS_WRONG: return sign_hs(sig, "another-secret-another-secret-another", msg, len);
	case S_HS_RSA_PUB: return sign_hs(sig, rsa_pub_der_b64, msg, len);
	case S_RSA: return sign_evp(sig, rsa, msg, len);
	case S_RSA2: return sign_evp(sig, rsa2, msg, len);
	case S_EC: return sign_evp(sig, ec, msg, len);
	case S_EC2: return sign_evp(sig, ec2, msg, len);
	case S_ED: crypto_sign_detached(sig, NULL, m, len, ed_sk); return 64;
	case S_ED2: crypto_sign_detached(sig, NULL, m, len, ed2_sk); return 64;
	default: return 0;
	}
}

/* header.payload.signature; sent (when not NULL) replaces the claims after signing. */
static void make_token(char *out, size_t cap, const char *header, const char *claims,
                       const char *sent, enum signer s)
{
	static char h64[512], c64[16384], s64[1024];
	unsigned char sig[600];
	b64(h64, sizeof(h64), header, strlen(header));
	b64(c64, sizeof(c64), claims, strlen(claims));
	snprintf(out, cap, "%s.%s", h64, c64);
	size_t n = sign(sig, s, out, strlen(out));
	if (sent)
		b64(c64, sizeof(c64), sent, strlen(sent));
	s64[0] = '\0';
	if (n)
		b64(s64, sizeof(s64), sig, n);
	snprintf(out, cap, "%s.%s.%s", h64, c64, s64);
}

static const struct row {
	const char *desc;
	const char *header;     /* NULL: {"alg":alg,"kid":kid} */
	const char *alg, *kid;
	enum signer signer;
	const char *claims;     /* NULL: CLAIMS */
	const char *sent;       /* claims sent instead of the signed ones */
	enum policy policy;
	int want;               /* 0, AH_EDENIED or AH_ENOTFOUND */
	const char *why;        /* expected message on failure, NULL: any */
} rows[] = {
	{"HS256 good", NULL, "HS256", NULL, S_HS, NULL, NULL, P_BOTH, 0, NULL},
	{"HS256 bad signature", NULL, "HS256", NULL, S_HS_WRONG, NULL, NULL, P_BOTH, AH_EDENIED, "Invalid token"},
	{"HS256 tampered claims", NULL, "HS256", NULL, S_HS, NULL,
	 "{\"iss\":\"https://idp.test\",\"aud\":\"agenthost\",\"sub\":\"admin\",\"exp\":1800000600}",
	 P_BOTH, AH_EDENIED, "Invalid token"},
	{"HS256 without a configured secret", NULL, "HS256", NULL, S_HS, NULL, NULL, P_JWKS_ONLY, AH_EDENIED, NULL},
	{"alg none, no signature", "{\"alg\":\"none\"}", NULL, NULL, S_NONE, NULL, NULL, P_BOTH, AH_EDENIED, NULL},
	{"alg none with a signature", "{\"alg\":\"none\"}", NULL, NULL, S_HS, NULL, NULL, P_BOTH, AH_EDENIED, NULL},
	{"alg None", "{\"alg\":\"None\"}", NULL, NULL, S_HS, NULL, NULL, P_BOTH, AH_EDENIED, NULL},
	{"unknown alg HS512", "{\"alg\":\"HS512\"}", NULL, NULL, S_HS, NULL, NULL, P_BOTH, AH_EDENIED, NULL},
	{"alg not a string", "{\"alg\":256}", NULL, NULL, S_HS, NULL, NULL, P_BOTH, AH_EDENIED, NULL},
	{"no alg", "{\"typ\":\"JWT\"}", NULL, NULL, S_HS, NULL, NULL, P_BOTH, AH_EDENIED, NULL},
	{"crit header", "{\"alg\":\"HS256\",\"crit\":[\"exp\"]}", NULL, NULL, S_HS, NULL, NULL, P_BOTH, AH_EDENIED, NULL},
	{"alg confusion: HS256 keyed with the RSA public key, JWKS only", NULL, "HS256", "rsa1",
	 S_HS_RSA_PUB, NULL, NULL, P_JWKS_ONLY, AH_EDENIED, NULL},
	{"alg confusion: HS256 keyed with the RSA public key, both", NULL, "HS256", "rsa1",
	 S_HS_RSA_PUB, NULL, NULL, P_BOTH, AH_EDENIED, NULL},
	{"alg confusion: ES256 header on an RSA kid", NULL, "ES256", "rsa1", S_EC, NULL, NULL, P_BOTH, AH_EDENIED, NULL},
	{"alg confusion: RS256 header on an EC kid", NULL, "RS256", "ec1", S_RSA, NULL, NULL, P_BOTH, AH_EDENIED, NULL},
	{"alg confusion: EdDSA header on an RSA kid", NULL, "EdDSA", "rsa1", S_ED, NULL, NULL, P_BOTH, AH_EDENIED, NULL},
	{"expired", NULL, "HS256", NULL, S_HS, "{\"sub\":\"s\",\"iss\":\"https://idp.test\",\"aud\":\"agenthost\",\"exp\":1799999900}",
	 NULL, P_BOTH, AH_EDENIED, "Token expired"},
	{"expired within the leeway", NULL, "HS256", NULL, S_HS,
	 "{\"sub\":\"s\",\"iss\":\"https://idp.test\",\"aud\":\"agenthost\",\"exp\":1799999990}", NULL, P_BOTH, 0, NULL},
	{"expired, forged: signature reported first", NULL, "HS256", NULL, S_HS_WRONG,
	 "{\"sub\":\"s\",\"exp\":1}", NULL, P_OPEN, AH_EDENIED, "Invalid token"},
	{"no exp", NULL, "HS256", NULL, S_HS, "{\"sub\":\"s\",\"iss\":\"https://idp.test\",\"aud\":\"agenthost\"}",
	 NULL, P_BOTH, AH_EDENIED, "Invalid token"},
	{"exp as a string", NULL, "HS256", NULL, S_HS,
	 "{\"sub\":\"s\",\"iss\":\"https://idp.test\",\"aud\":\"agenthost\",\"exp\":\"1800000600\"}", NULL, P_BOTH, AH_EDENIED, NULL},
	{"exp as a fraction", NULL, "HS256", NULL, S_HS,
	 "{\"sub\":\"s\",\"iss\":\"https://idp.test\",\"aud\":\"agenthost\",\"exp\":1800000600.5}", NULL, P_BOTH, 0, NULL},
	{"nbf in the future", NULL, "HS256", NULL, S_HS,
	 "{\"sub\":\"s\",\"iss\":\"https://idp.test\",\"aud\":\"agenthost\",\"exp\":1800000600,\"nbf\":1800000300}",
	 NULL, P_BOTH, AH_EDENIED, "Token not yet valid"},
	{"nbf within the leeway", NULL, "HS256", NULL, S_HS,
	 "{\"sub\":\"s\",\"iss\":\"https://idp.test\",\"aud\":\"agenthost\",\"exp\":1800000600,\"nbf\":1800000020}",
	 NULL, P_BOTH, 0, NULL},
	{"iat in the future", NULL, "HS256", NULL, S_HS,
	 "{\"sub\":\"s\",\"iss\":\"https://idp.test\",\"aud\":\"agenthost\",\"exp\":1800000600,\"iat\":1800000300}",
	 NULL, P_BOTH, AH_EDENIED, NULL},
	{"wrong iss", NULL, "HS256", NULL, S_HS,
	 "{\"sub\":\"s\",\"iss\":\"https://evil.test\",\"aud\":\"agenthost\",\"exp\":1800000600}", NULL, P_BOTH, AH_EDENIED, "Invalid token"},
	{"no iss while one is required", NULL, "HS256", NULL, S_HS,
	 "{\"sub\":\"s\",\"aud\":\"agenthost\",\"exp\":1800000600}", NULL, P_BOTH, AH_EDENIED, NULL},
	{"no iss, none required", NULL, "HS256", NULL, S_HS, "{\"sub\":\"s\",\"exp\":1800000600}", NULL, P_OPEN, 0, NULL},
	{"wrong aud", NULL, "HS256", NULL, S_HS,
	 "{\"sub\":\"s\",\"iss\":\"https://idp.test\",\"aud\":\"other\",\"exp\":1800000600}", NULL, P_BOTH, AH_EDENIED, NULL},
	{"aud list containing ours", NULL, "HS256", NULL, S_HS,
	 "{\"sub\":\"s\",\"iss\":\"https://idp.test\",\"aud\":[\"x\",\"agenthost\"],\"exp\":1800000600}", NULL, P_BOTH, 0, NULL},
	{"aud list without ours", NULL, "HS256", NULL, S_HS,
	 "{\"sub\":\"s\",\"iss\":\"https://idp.test\",\"aud\":[\"x\",\"y\"],\"exp\":1800000600}", NULL, P_BOTH, AH_EDENIED, NULL},
	{"no aud while one is required", NULL, "HS256", NULL, S_HS,
	 "{\"sub\":\"s\",\"iss\":\"https://idp.test\",\"exp\":1800000600}", NULL, P_BOTH, AH_EDENIED, NULL},
	{"no sub", NULL, "HS256", NULL, S_HS,
	 "{\"iss\":\"https://idp.test\",\"aud\":\"agenthost\",\"exp\":1800000600}", NULL, P_BOTH, AH_EDENIED, NULL},
	{"empty sub", NULL, "HS256", NULL, S_HS,
	 "{\"sub\":\"\",\"iss\":\"https://idp.test\",\"aud\":\"agenthost\",\"exp\":1800000600}", NULL, P_BOTH, AH_EDENIED, NULL},
	{"claims not an object", NULL, "HS256", NULL, S_HS, "[1,2]", NULL, P_BOTH, AH_EDENIED, NULL},
	{"claims with trailing bytes", NULL, "HS256", NULL, S_HS, CLAIMS "x", NULL, P_BOTH, AH_EDENIED, NULL},
	{"Ed25519 good", NULL, "EdDSA", "ed1", S_ED, NULL, NULL, P_BOTH, 0, NULL},
	{"Ed25519 bad signature", NULL, "EdDSA", "ed1", S_ED2, NULL, NULL, P_BOTH, AH_EDENIED, NULL},
	{"Ed25519 without kid", NULL, "EdDSA", NULL, S_ED, NULL, NULL, P_BOTH, 0, NULL},
	{"RS256 good", NULL, "RS256", "rsa1", S_RSA, NULL, NULL, P_BOTH, 0, NULL},
	{"RS256 good, JWKS only", NULL, "RS256", "rsa1", S_RSA, NULL, NULL, P_JWKS_ONLY, 0, NULL},
	{"RS256 bad signature", NULL, "RS256", "rsa1", S_RSA2, NULL, NULL, P_BOTH, AH_EDENIED, NULL},
	{"RS256 tampered claims", NULL, "RS256", "rsa1", S_RSA, NULL,
	 "{\"iss\":\"https://idp.test\",\"aud\":\"agenthost\",\"sub\":\"admin\",\"exp\":1800000600}",
	 P_BOTH, AH_EDENIED, NULL},
	{"RS256 unknown kid", NULL, "RS256", "rsa9", S_RSA, NULL, NULL, P_BOTH, AH_ENOTFOUND, NULL},
	{"RS256 with no key set yet", NULL, "RS256", "rsa1", S_RSA, NULL, NULL, P_HS_ONLY, AH_ENOTFOUND, NULL},
	{"ES256 good", NULL, "ES256", "ec1", S_EC, NULL, NULL, P_BOTH, 0, NULL},
	{"ES256 bad signature", NULL, "ES256", "ec1", S_EC2, NULL, NULL, P_BOTH, AH_EDENIED, NULL},
	{"kid not a string", "{\"alg\":\"RS256\",\"kid\":7}", NULL, NULL, S_RSA, NULL, NULL, P_BOTH, AH_EDENIED, NULL},
};

static void policy_for(ah_jwt_policy *p, enum policy which)
{
	memset(p, 0, sizeof(*p));
	p->now = NOW;
	p->leeway = 30;
	if (which != P_JWKS_ONLY) {
		p->hs256_secret = (const unsigned char *)SECRET;
		p->hs256_secret_len = strlen(SECRET);
	}
	if (which != P_HS_ONLY)
		p->keys = keys;
	if (which != P_OPEN) {
		p->issuer = "https://idp.test";
		p->audience = "agenthost";
	}
}

/* The claims live in this arena until the next run. */
static ah_arena *arena;

static int run(const char *tok, enum policy which, const char **why, ah_jwt_claims *c)
{
	ah_jwt_policy p;
	policy_for(&p, which);
	ah_arena_reset(arena);
	return ah_jwt_verify(c, arena, tok, &p, why);
}

static void test_rows(void)
{
	static char tok[20000], header[256];
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];
		if (r->header)
			snprintf(header, sizeof(header), "%s", r->header);
		else if (r->kid)
			snprintf(header, sizeof(header), "{\"alg\":\"%s\",\"kid\":\"%s\",\"typ\":\"JWT\"}", r->alg, r->kid);
		else
			snprintf(header, sizeof(header), "{\"alg\":\"%s\",\"typ\":\"JWT\"}", r->alg);
		make_token(tok, sizeof(tok), header, r->claims ? r->claims : CLAIMS, r->sent, r->signer);
		const char *why = NULL;
		ah_jwt_claims c;
		int rc = run(tok, r->policy, &why, &c);
		ok(rc == r->want && (rc == 0 || (why && (!r->why || strcmp(why, r->why) == 0))),
		   "%s: rc %d (want %d), %s", r->desc, rc, r->want, rc ? why : "accepted");
	}
}

/* Shapes refused before any signature work; each is a broken variant of a good token. */
static void test_malformed(void)
{
	static char good[4096], tok[20000];
	static char big[9000];
	const char *why;
	ah_jwt_claims c;
	make_token(good, sizeof(good), "{\"alg\":\"HS256\"}", CLAIMS, NULL, S_HS);
	ok(run(good, P_BOTH, &why, &c) == 0 && strcmp(c.sub, "user-1") == 0 &&
	   strcmp(c.iss, "https://idp.test") == 0 && c.email && strcmp(c.email, "a@b.test") == 0,
	   "good token: claims are returned");
	const char *dot = strchr(good, '.');
	const struct {
		const char *desc, *fmt;
	} bad[] = {
		{"bad base64url character", "%.*s!%s"},
		{"base64 padding", "%.*s=%s"},
		{"standard base64 '+'", "%.*s+%s"},
		{"four parts", "%.*s.x%s"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(tok, sizeof(tok), bad[i].fmt, (int)(dot - good), good, dot);
		ok(run(tok, P_BOTH, &why, &c) == AH_EDENIED, "malformed: %s", bad[i].desc);
	}
	snprintf(tok, sizeof(tok), "%s.", good);
	ok(run(tok, P_BOTH, &why, &c) == AH_EDENIED, "malformed: trailing dot");
	ok(run("..", P_BOTH, &why, &c) == AH_EDENIED, "malformed: empty parts");
	ok(run("", P_BOTH, &why, &c) == AH_EDENIED, "malformed: empty token");
	memset(big, 'a', sizeof(big) - 1);
	char claims[9200];
	snprintf(claims, sizeof(claims), "{\"sub\":\"s\",\"exp\":1800000600,\"pad\":\"%s\"}", big);
	make_token(tok, sizeof(tok), "{\"alg\":\"HS256\"}", claims, NULL, S_HS);
	ok(strlen(tok) > AH_JWT_MAX_TOKEN && run(tok, P_OPEN, &why, &c) == AH_EDENIED,
	   "oversize: a well-signed token over 8 KiB is refused");
	ok(ah_jwt_looks_like("a.b.c") && !ah_jwt_looks_like("a.b") && !ah_jwt_looks_like("a.b.c.d") &&
	   !ah_jwt_looks_like("ahk_AbCd1234_0123456789"), "looks_like: exactly two dots");
}

static void test_email_claims(void)
{
	/* Linking to an existing account needs email_verified: true, so only the JSON
	 * boolean counts; a string or a number says nothing. */
	static const struct {
		const char *claim;
		ah_jwt_email_state want;
		const char *what;
	} rows[] = {
		{",\"email_verified\":true", AH_JWT_EMAIL_VERIFIED, "email_verified true is verified"},
		{",\"email_verified\":false", AH_JWT_EMAIL_UNVERIFIED, "email_verified false is unverified"},
		{"", AH_JWT_EMAIL_UNSTATED, "no email_verified is unstated"},
		{",\"email_verified\":\"true\"", AH_JWT_EMAIL_UNSTATED, "the string \"true\" is unstated"},
		{",\"email_verified\":1", AH_JWT_EMAIL_UNSTATED, "the number 1 is unstated"},
		{",\"email_verified\":null", AH_JWT_EMAIL_UNSTATED, "null is unstated"},
	};
	static char tok[4096];
	char claims[256];
	const char *why;
	ah_jwt_claims c;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		snprintf(claims, sizeof(claims), "{\"sub\":\"s\",\"exp\":1800000600,\"email\":\"x@y.test\"%s}",
		         rows[i].claim);
		make_token(tok, sizeof(tok), "{\"alg\":\"HS256\"}", claims, NULL, S_HS);
		ok(run(tok, P_OPEN, &why, &c) == 0 && c.email_verified == rows[i].want, "%s", rows[i].what);
	}
	make_token(tok, sizeof(tok), "{\"alg\":\"HS256\"}", "{\"sub\":\"s\",\"exp\":1800000600}", NULL, S_HS);
	ok(run(tok, P_OPEN, &why, &c) == 0 && c.email == NULL && strcmp(c.iss, "") == 0,
	   "no email claim: verified, email NULL (the login refuses it)");
}

static const char *jwk_rsa(char *out, size_t cap, EVP_PKEY *pk, const char *kid, const char *extra)
{
	BIGNUM *n = NULL, *e = NULL;
	unsigned char nb[1024], eb[8];
	char n64[1400], e64[16];
	EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_RSA_N, &n);
	EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_RSA_E, &e);
	b64(n64, sizeof(n64), nb, (size_t)BN_bn2bin(n, nb));
	b64(e64, sizeof(e64), eb, (size_t)BN_bn2bin(e, eb));
	snprintf(out, cap, "{\"kty\":\"RSA\",\"kid\":\"%s\",\"n\":\"%s\",\"e\":\"%s\"%s}", kid, n64, e64, extra);
	BN_free(n);
	BN_free(e);
	return out;
}

static const char *jwk_ec(char *out, size_t cap, EVP_PKEY *pk, const char *kid)
{
	BIGNUM *x = NULL, *y = NULL;
	unsigned char xb[32], yb[32];
	char x64[64], y64[64];
	EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_EC_PUB_X, &x);
	EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_EC_PUB_Y, &y);
	BN_bn2binpad(x, xb, 32);
	BN_bn2binpad(y, yb, 32);
	snprintf(out, cap, "{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"%s\",\"x\":\"%s\",\"y\":\"%s\",\"use\":\"sig\"}",
	         kid, b64(x64, sizeof(x64), xb, 32), b64(y64, sizeof(y64), yb, 32));
	BN_free(x);
	BN_free(y);
	return out;
}

static int load_jwks(ah_jwks **out, const char *doc)
{
	ah_err err = {0};
	return ah_jwks_parse(out, doc, strlen(doc), &err);
}

static void setup_keys(void)
{
	static char doc[8192], r1[2048], e1[512], ed64[64];
	rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	rsa2 = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	ec2 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	crypto_sign_keypair(ed_pk, ed_sk);
	crypto_sign_keypair(ed2_pk, ed2_sk);
	unsigned char der[600], *p = der;
	int n = i2d_PUBKEY(rsa, &p);
	b64(rsa_pub_der_b64, sizeof(rsa_pub_der_b64), der, (size_t)n);
	snprintf(doc, sizeof(doc),
	         "{\"keys\":[%s,%s,{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"ed1\",\"x\":\"%s\",\"alg\":\"EdDSA\"},"
	         "{\"kty\":\"oct\",\"kid\":\"rsa1\",\"k\":\"%s\"}]}",
	         jwk_rsa(r1, sizeof(r1), rsa, "rsa1", ",\"alg\":\"RS256\""), jwk_ec(e1, sizeof(e1), ec, "ec1"),
	         b64(ed64, sizeof(ed64), ed_pk, 32), rsa_pub_der_b64);
	int rc = load_jwks(&keys, doc);
	ok(rc == 0 && ah_jwks_count(keys) == 3,
	   "JWKS: RSA, EC and OKP keys loaded, the oct key skipped (%zu)", ah_jwks_count(keys));
}

static void test_jwks_parse(void)
{
	static char doc[4096], r1[2048];
	ah_jwks *k = NULL;
	EVP_PKEY *small = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
	snprintf(doc, sizeof(doc), "{\"keys\":[%s]}", jwk_rsa(r1, sizeof(r1), small, "s", ""));
	ok(load_jwks(&k, doc) == 0 && ah_jwks_count(k) == 0, "JWKS: RSA-1024 skipped");
	ah_jwks_free(k);
	snprintf(doc, sizeof(doc), "{\"keys\":[%s]}", jwk_rsa(r1, sizeof(r1), rsa, "r", ",\"alg\":\"PS256\""));
	ok(load_jwks(&k, doc) == 0 && ah_jwks_count(k) == 0, "JWKS: RSA key meant for PS256 skipped");
	ah_jwks_free(k);
	snprintf(doc, sizeof(doc), "{\"keys\":[%s]}", jwk_rsa(r1, sizeof(r1), rsa, "r", ",\"use\":\"enc\""));
	ok(load_jwks(&k, doc) == 0 && ah_jwks_count(k) == 0, "JWKS: encryption key skipped");
	ah_jwks_free(k);
	ok(load_jwks(&k, "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\","
	                 "\"y\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE\"}]}") == 0 && ah_jwks_count(k) == 0,
	   "JWKS: EC point off the curve skipped");
	ah_jwks_free(k);
	ok(load_jwks(&k, "{\"nokeys\":[]}") == AH_EINVALID && k == NULL, "JWKS: not a key set");
	ok(load_jwks(&k, "not json") == AH_EINVALID && k == NULL, "JWKS: not JSON");
	EVP_PKEY_free(small);
}

int main(void)
{
	if (sodium_init() < 0)
		return 1;
	arena = ah_arena_new();
	setup_keys();
	test_rows();
	test_malformed();
	test_email_claims();
	test_jwks_parse();
	ah_arena_destroy(arena);
	ah_jwks_free(keys);
	EVP_PKEY_free(rsa);
	EVP_PKEY_free(rsa2);
	EVP_PKEY_free(ec);
	EVP_PKEY_free(ec2);
	return tap_done();
}
