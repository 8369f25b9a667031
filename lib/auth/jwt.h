/* JWT bearer tokens from a configured identity provider.
 *
 * Three layers, each usable alone (the unit test drives the first two without a
 * database or a network):
 *   - ah_jwt_verify: a compact JWS checked against an HS256 shared secret or a
 *     key set (RS256, ES256, EdDSA), then its claims against a policy;
 *   - ah_jwks_*: a JSON Web Key Set parsed into verification keys, and the
 *     configured JWKS URL's keys, fetched by a refresher beside the workers;
 *   - ah_auth_jwt: the request-level entry that ah_auth_request calls, which
 *     also maps (iss, sub) to a user, creating it on first login (or linking it
 *     to the user with its email, only with jwt_link_by_email). */
#ifndef AH_AUTH_JWT_H
#define AH_AUTH_JWT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/config.h"
#include "core/err.h"
#include "http/http.h"

/* Tokens longer than this are refused before any decoding. */
#define AH_JWT_MAX_TOKEN 8192

typedef enum { AH_JWT_HS256 = 1, AH_JWT_RS256, AH_JWT_ES256, AH_JWT_EDDSA } ah_jwt_alg;

typedef struct ah_jwks ah_jwks;

/* What a token must satisfy besides its signature. */
typedef struct ah_jwt_policy {
	const unsigned char *hs256_secret; /* NULL: HS256 tokens are refused */
	size_t hs256_secret_len;
	const ah_jwks *keys;               /* NULL: only HS256 can work */
	const char *issuer;                /* NULL: any iss */
	const char *audience;              /* NULL: any aud */
	const char *email_claim;           /* NULL: "email" */
	long long leeway;                  /* seconds of clock skew allowed */
	int64_t now;                       /* seconds since the epoch */
} ah_jwt_policy;

/* What the token says of its email: email_verified is trusted only as a JSON
 * boolean (a string "true" is AH_JWT_EMAIL_UNSTATED, as OpenID Connect says). */
typedef enum {
	AH_JWT_EMAIL_UNSTATED = 0,         /* no email_verified, or not a boolean */
	AH_JWT_EMAIL_VERIFIED,             /* email_verified: true */
	AH_JWT_EMAIL_UNVERIFIED,           /* email_verified: false */
} ah_jwt_email_state;

/* The claims a login needs, copied into the caller's arena. */
typedef struct ah_jwt_claims {
	const char *iss;                   /* "" when the token has none */
	const char *sub;
	const char *email;                 /* NULL when the claim is absent */
	ah_jwt_email_state email_verified;
} ah_jwt_claims;

/* True if tok has the outline of a compact JWS: exactly two dots. */
bool ah_jwt_looks_like(const char *tok);

/* Verifies tok. Returns 0 with *out filled, AH_EDENIED with *why a 401 message,
 * or AH_ENOTFOUND (also with *why) when an asymmetric token's kid is not in
 * p->keys (or p->keys is NULL), so that the caller may fetch the key set and try
 * once more. */
int ah_jwt_verify(ah_jwt_claims *out, ah_arena *a, const char *tok, const ah_jwt_policy *p,
                  const char **why);

/* Parses a JWK Set document. Keys of unknown or unusable types (oct, other curves,
 * RSA below 2048 bits) are skipped, never an error; a document that is not a key
 * set is AH_EINVALID. */
int ah_jwks_parse(ah_jwks **out, const char *json, size_t len, ah_err *err);
void ah_jwks_free(ah_jwks *k);
size_t ah_jwks_count(const ah_jwks *k);

/* Checks sig over msg with the key named kid (any key usable for alg when kid is
 * NULL). 0, AH_EDENIED (bad signature, or a key of another type), or AH_ENOTFOUND
 * (no key with that kid). alg must not be HS256: a key set holds no secrets. */
int ah_jwks_verify(const ah_jwks *k, const char *kid, ah_jwt_alg alg, const unsigned char *msg,
                   size_t len, const unsigned char *sig, size_t siglen);

/* Refuses a `jwt_jwks_url` any local user could serve (jwks_url.c): on
 * loopback, link-local or a port above 1023 of this host, unless
 * `jwt_jwks_allow_local` is set. The API calls it at start. */
int ah_jwks_url_check(const ah_config *cfg, ah_err *err);

/* Why a connection to sa would reach such a place; NULL when it would not. */
struct sockaddr;
const char *ah_jwks_addr_refused(const struct sockaddr *sa);

/* The key set of `jwt_jwks_url` (jwks_cache.c). With the host's shared copy,
 * never waits on the network: refresh (an unknown kid) asks the refresher to
 * fetch again, which it does at most once a minute for that reason. Without it,
 * fetches itself, at most every 10 s. *out is NULL when there is no key set. */
void ah_jwks_cached(const ah_jwks **out, const ah_config *cfg, bool refresh);

/* The shared copy: mapped by the API master before it forks anything. */
int ah_jwks_share_init(void);

/* The refresher process's loop (returns at once without a JWKS URL or the
 * shared copy): fetches at start, when `jwt_jwks_cache_seconds` old, and when a
 * worker asks (an unknown kid, at most once a minute); failures retried every
 * 10 s while the previous set keeps serving. */
int ah_jwks_refresher_run(const ah_config *cfg);

/* Authenticates a bearer token that ah_jwt_looks_like accepted and sets r->user.
 * Same contract as ah_auth_request: 0, AH_EDENIED (*why set) or AH_EFAIL. */
int ah_auth_jwt(ah_req *r, const char *tok, const char **why);

#endif
