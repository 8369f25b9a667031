/* Compact JWS verification and claim checks (see jwt.h).
 *
 * Strict on purpose: the header names the algorithm, but it only ever selects
 * among the ones we know, each bound to one kind of key. HS256 is checked
 * against the configured shared secret and nothing else, so a token that claims
 * HS256 cannot turn a public key from the JWKS into an HMAC secret; the JWKS
 * keys verify only the asymmetric algorithm their type implies. */
#include "auth/jwt.h"
#include "core/json.h"

#include <json-c/json.h>
#include <sodium.h>
#include <string.h>

struct token {
	ah_jwt_alg alg;
	const char *kid;                   /* NULL when the header has none */
	json_object *claims;
	const unsigned char *signed_part;  /* "header.payload" as sent */
	size_t signed_len;
	unsigned char *sig;
	size_t sig_len;
};

bool ah_jwt_looks_like(const char *tok)
{
	const char *d1 = strchr(tok, '.');
	const char *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
	return d2 && !strchr(d2 + 1, '.');
}

/* Base64url without padding. libsodium refuses any other character and
 * non-zero trailing bits, so one token has exactly one spelling. */
static int b64url_decode(ah_arena *a, unsigned char **out, size_t *outlen, const char *s, size_t n)
{
	const char *end = NULL;
	size_t cap = n / 4 * 3 + 3;
	unsigned char *buf = ah_alloc(a, cap);
	if (n == 0 || sodium_base642bin(buf, cap, s, n, NULL, outlen, &end,
	                                sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 || end != s + n)
		return AH_EDENIED;
	*out = buf;
	return 0;
}

static void put_json(void *o)
{
	json_object_put(o);
}

/* A JSON object spanning exactly s[0..n), owned by the arena; NULL otherwise. */
static json_object *parse_object(ah_arena *a, const unsigned char *s, size_t n)
{
	if (n == 0 || memchr(s, '\0', n))
		return NULL;
	json_tokener *t = json_tokener_new_ex(16);
	if (!t)
		return NULL;
	json_tokener_set_flags(t, JSON_TOKENER_STRICT);
	json_object *o = json_tokener_parse_ex(t, (const char *)s, (int)n);
	bool whole = o && json_tokener_get_error(t) == json_tokener_success &&
	             json_tokener_get_parse_end(t) == n;
	json_tokener_free(t);
	if (!whole || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		return NULL;
	}
	ah_arena_on_cleanup(a, put_json, o);
	return o;
}

static ah_jwt_alg alg_by_name(const char *name)
{
	static const struct {
		const char *name;
		ah_jwt_alg alg;
	} algs[] = {
		{"HS256", AH_JWT_HS256}, {"RS256", AH_JWT_RS256},
		{"ES256", AH_JWT_ES256}, {"EdDSA", AH_JWT_EDDSA},
	};
	for (size_t i = 0; name && i < sizeof(algs) / sizeof(algs[0]); i++)
		if (strcmp(name, algs[i].name) == 0)
			return algs[i].alg;
	return 0; /* "none" and everything else */
}

static int parse_header(struct token *t, json_object *h)
{
	json_object *v;
	t->alg = alg_by_name(ah_json_get_str(h, "alg"));
	if (!t->alg)
		return AH_EDENIED;
	/* We implement no header extensions, so any critical one is unsupported. */
	if (json_object_object_get_ex(h, "crit", NULL))
		return AH_EDENIED;
	if (json_object_object_get_ex(h, "kid", &v)) {
		t->kid = ah_json_get_str(h, "kid");
		if (!t->kid || strlen(t->kid) > 256)
			return AH_EDENIED;
	}
	return 0;
}

static int split_token(struct token *t, ah_arena *a, const char *tok)
{
	size_t n = strnlen(tok, AH_JWT_MAX_TOKEN + 1);
	if (n > AH_JWT_MAX_TOKEN || !ah_jwt_looks_like(tok))
		return AH_EDENIED;
	const char *d1 = strchr(tok, '.'), *d2 = strchr(d1 + 1, '.');
	unsigned char *hdr, *body;
	size_t hlen, blen;
	if (b64url_decode(a, &hdr, &hlen, tok, (size_t)(d1 - tok)) != 0 ||
	    b64url_decode(a, &body, &blen, d1 + 1, (size_t)(d2 - d1 - 1)) != 0 ||
	    b64url_decode(a, &t->sig, &t->sig_len, d2 + 1, n - (size_t)(d2 + 1 - tok)) != 0)
		return AH_EDENIED;
	json_object *h = parse_object(a, hdr, hlen);
	t->claims = parse_object(a, body, blen);
	if (!h || !t->claims || parse_header(t, h) != 0)
		return AH_EDENIED;
	t->signed_part = (const unsigned char *)tok;
	t->signed_len = (size_t)(d2 - tok);
	return 0;
}

static int check_hs256(const struct token *t, const ah_jwt_policy *p)
{
	unsigned char mac[crypto_auth_hmacsha256_BYTES];
	crypto_auth_hmacsha256_state st;
	if (!p->hs256_secret || t->sig_len != sizeof(mac))
		return AH_EDENIED;
	crypto_auth_hmacsha256_init(&st, p->hs256_secret, p->hs256_secret_len);
	crypto_auth_hmacsha256_update(&st, t->signed_part, t->signed_len);
	crypto_auth_hmacsha256_final(&st, mac);
	int rc = sodium_memcmp(mac, t->sig, sizeof(mac)) == 0 ? 0 : AH_EDENIED;
	sodium_memzero(&st, sizeof(st));
	return rc;
}

static int check_signature(const struct token *t, const ah_jwt_policy *p)
{
	if (t->alg == AH_JWT_HS256)
		return check_hs256(t, p);
	if (!p->keys)
		return AH_ENOTFOUND; /* the caller may have a key set to fetch */
	return ah_jwks_verify(p->keys, t->kid, t->alg, t->signed_part, t->signed_len, t->sig,
	                      t->sig_len);
}

/* A NumericDate claim: *present false when absent; AH_EDENIED when not a number.
 * Integers are clamped to +-1e15 s (30 million years), so that the checks'
 * sums cannot overflow whatever a token says (fuzz_jwt found exp = 2^63-1). */
#define TIME_CLAIM_MAX 1000000000000000LL
static int time_claim(json_object *c, const char *name, long long *out, bool *present)
{
	json_object *v;
	*present = json_object_object_get_ex(c, name, &v);
	if (!*present)
		return 0;
	if (json_object_is_type(v, json_type_int)) {
		int64_t n = json_object_get_int64(v);
		*out = n > TIME_CLAIM_MAX ? TIME_CLAIM_MAX : n < -TIME_CLAIM_MAX ? -TIME_CLAIM_MAX : n;
	}
	else if (json_object_is_type(v, json_type_double) && json_object_get_double(v) > -1e15 &&
	         json_object_get_double(v) < 1e15)
		*out = (long long)json_object_get_double(v);
	else
		return AH_EDENIED;
	return 0;
}

static int check_times(json_object *c, const ah_jwt_policy *p, const char **why)
{
	long long exp = 0, nbf = 0, iat = 0;
	bool has_exp, has_nbf, has_iat;
	*why = "Invalid token";
	if (time_claim(c, "exp", &exp, &has_exp) != 0 || !has_exp ||
	    time_claim(c, "nbf", &nbf, &has_nbf) != 0 || time_claim(c, "iat", &iat, &has_iat) != 0)
		return AH_EDENIED;
	if (p->now > exp + p->leeway) {
		*why = "Token expired";
		return AH_EDENIED;
	}
	/* Issued or valid only in the future: a clock far off, or a forged token. */
	if ((has_nbf && nbf > p->now + p->leeway) || (has_iat && iat > p->now + p->leeway)) {
		*why = "Token not yet valid";
		return AH_EDENIED;
	}
	return 0;
}

static bool audience_ok(json_object *c, const char *want)
{
	json_object *aud;
	if (!want)
		return true;
	if (!json_object_object_get_ex(c, "aud", &aud))
		return false;
	if (json_object_is_type(aud, json_type_string))
		return strcmp(json_object_get_string(aud), want) == 0;
	if (!json_object_is_type(aud, json_type_array))
		return false;
	for (size_t i = 0; i < json_object_array_length(aud); i++) {
		json_object *e = json_object_array_get_idx(aud, i);
		if (json_object_is_type(e, json_type_string) && strcmp(json_object_get_string(e), want) == 0)
			return true;
	}
	return false;
}

/* iss and sub become the identity's key, VARCHAR(255) each. */
static int check_identity(ah_jwt_claims *out, ah_arena *a, json_object *c, const ah_jwt_policy *p)
{
	const char *iss = ah_json_get_str(c, "iss"), *sub = ah_json_get_str(c, "sub");
	bool has_iss = json_object_object_get_ex(c, "iss", NULL);
	if ((has_iss && !iss) || (p->issuer && (!iss || strcmp(iss, p->issuer) != 0)))
		return AH_EDENIED;
	if (!sub || !*sub || strlen(sub) > 255 || (iss && strlen(iss) > 255) || !audience_ok(c, p->audience))
		return AH_EDENIED;
	out->iss = ah_strdup(a, iss ? iss : "");
	out->sub = ah_strdup(a, sub);
	const char *email = ah_json_get_str(c, p->email_claim ? p->email_claim : "email");
	out->email = email ? ah_strdup(a, email) : NULL;
	json_object *ev;
	if (json_object_object_get_ex(c, "email_verified", &ev) && json_object_is_type(ev, json_type_boolean))
		out->email_verified = json_object_get_boolean(ev) ? AH_JWT_EMAIL_VERIFIED : AH_JWT_EMAIL_UNVERIFIED;
	return 0;
}

int ah_jwt_verify(ah_jwt_claims *out, ah_arena *a, const char *tok, const ah_jwt_policy *p,
                  const char **why)
{
	struct token t = {0};
	memset(out, 0, sizeof(*out));
	*why = "Invalid token";
	if (split_token(&t, a, tok) != 0)
		return AH_EDENIED;
	/* The signature first: nothing about an unverified token is worth reporting. */
	int rc = check_signature(&t, p);
	if (rc != 0)
		return rc;
	if (check_times(t.claims, p, why) != 0)
		return AH_EDENIED;
	if (check_identity(out, a, t.claims, p) != 0) {
		*why = "Invalid token";
		return AH_EDENIED;
	}
	return 0;
}
