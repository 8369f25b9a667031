/* Fuzz target: a bearer token through JWT verification, against an HS256
 * secret and a key set parsed from the input (the JWKS document an identity
 * provider serves). The token is put together from its parts, so that the
 * fuzzer works on the JSON inside rather than on base64:
 *   FLAG JWKS "\n" HEADER "\n" PAYLOAD "\n" SIGNATURE
 * FLAG bit 0: the harness signs HEADER.PAYLOAD with the HS256 secret itself
 * (the claims checks then run); otherwise SIGNATURE is used as given.
 * Properties: an unsigned token never verifies; a verified one has a subject. */
#include "auth/jwt.h"

#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const unsigned char secret[] = "fuzz-hs256-secret-of-32-bytes!!";

/* The next "\n"-ended part of the input. */
static const char *part(const char **p, const char *end, size_t *len)
{
	const char *s = *p, *nl = memchr(s, '\n', (size_t)(end - s));
	*len = (size_t)((nl ? nl : end) - s);
	*p = nl ? nl + 1 : end;
	return s;
}

static char *b64(char *out, const char *in, size_t len)
{
	sodium_bin2base64(out, sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_URLSAFE_NO_PADDING),
	                  (const unsigned char *)in, len, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	return out + strlen(out);
}

/* HEADER.PAYLOAD.SIGNATURE in base64url; signed here when sign. */
static char *token(const char *h, size_t hl, const char *pl, size_t pll, const char *sig,
                   size_t sl, bool sign)
{
	size_t cap = (hl + pll + sl) * 2 + 128;
	char *t = malloc(cap), *w = t;
	if (!t)
		return NULL;
	w = b64(w, h, hl);
	*w++ = '.';
	w = b64(w, pl, pll);
	unsigned char mac[crypto_auth_hmacsha256_BYTES];
	if (sign) {
		crypto_auth_hmacsha256_state st;
		crypto_auth_hmacsha256_init(&st, secret, sizeof secret - 1);
		crypto_auth_hmacsha256_update(&st, (unsigned char *)t, (size_t)(w - t));
		crypto_auth_hmacsha256_final(&st, mac);
		sig = (const char *)mac;
		sl = sizeof mac;
	}
	*w++ = '.';
	b64(w, sig, sl);
	return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool sign = data[0] & 1;
	const char *p = (const char *)data + 1, *end = (const char *)data + size;
	size_t jl, hl, pll, sl;
	const char *jwks = part(&p, end, &jl), *h = part(&p, end, &hl), *pl = part(&p, end, &pll);
	const char *sig = part(&p, end, &sl);
	ah_jwks *keys = NULL;
	ah_err err = {0};
	if (ah_jwks_parse(&keys, jwks, jl, &err) == 0)
		ah_jwks_count(keys);
	ah_jwt_policy pol = {
		.hs256_secret = secret, .hs256_secret_len = sizeof secret - 1, .keys = keys,
		.issuer = NULL, .audience = NULL, .leeway = 60, .now = 1800000000,
	};
	char *tok = token(h, hl, pl, pll, sig, sl, sign);
	ah_arena *a = ah_arena_new();
	ah_jwt_claims c = {0};
	const char *why = NULL;
	if (tok && ah_jwt_looks_like(tok) && ah_jwt_verify(&c, a, tok, &pol, &why) == 0 &&
	    (!sign || !c.sub))
		__builtin_trap();
	ah_arena_destroy(a);
	ah_jwks_free(keys);
	free(tok);
	return 0;
}
