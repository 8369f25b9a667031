/* Bearer authentication with API keys. */
#ifndef AH_AUTH_AUTH_H
#define AH_AUTH_AUTH_H

#include "auth/user.h"
#include "http/http.h"
#include "http/router.h"

/* Authenticates r from its Authorization header and sets r->user.
 * Returns 0, AH_EDENIED (missing/malformed/unknown/expired: a 401 is due, with
 * *why a message for it), or AH_EFAIL (database trouble). */
int ah_auth_request(ah_req *r, const char **why);

/* The columns every API-key lookup starts with, and where they come from; a
 * scoped lookup appends its own columns and a LEFT JOIN (see router.h). */
#define AH_AUTH_KEY_COLS                                                          \
	"k.id, k.key_hash, k.last_used_at, k.expires_at,"                             \
	" " AH_USER_COLS
#define AH_AUTH_KEY_NCOLS 10
#define AH_AUTH_KEY_FROM "api_keys k JOIN users u ON u.id = k.user_id"

/* As ah_auth_request, but an API key is looked up with scope->sql, which also
 * loads the record scope_param names into r->scope (r->scope_loaded = true). */
int ah_auth_request_scoped(ah_req *r, const ah_scope *scope, const char *scope_param,
                           const char **why);

/* True if s has the shape ahk_<8 base62>_<10 base62>. */
bool ah_auth_key_shape_ok(const char *s);

#endif
