/* Bearer authentication with API keys. */
#ifndef AH_AUTH_AUTH_H
#define AH_AUTH_AUTH_H

#include "http/http.h"

/* Authenticates r from its Authorization header and sets r->user.
 * Returns 0, AH_EDENIED (missing/malformed/unknown/expired: a 401 is due, with
 * *why a message for it), or AH_EFAIL (database trouble). */
int ah_auth_request(ah_req *r, const char **why);

/* True if s has the shape ahk_<8 base62>_<10 base62>. */
bool ah_auth_key_shape_ok(const char *s);

#endif
