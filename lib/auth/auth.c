/* API-key authentication: the key's public 8-character id finds the row, the keyed
 * hash of the whole key is compared in constant time, and last_used_at is written
 * at most once a minute so that reads stay reads. */
#include "auth/auth.h"
#include "auth/jwt.h"
#include "auth/user.h"
#include "crypto/crypto.h"
#include "db/record.h"
#include "core/util.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static bool is_b62(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
			return false;
	}
	return true;
}

bool ah_auth_key_shape_ok(const char *s)
{
	return strlen(s) == 23 && memcmp(s, "ahk_", 4) == 0 && is_b62(s + 4, 8) && s[12] == '_' &&
	       is_b62(s + 13, 10);
}

static const char *bearer_token(ah_req *r)
{
	const char *h = ah_param_env(r, "HTTP_AUTHORIZATION");
	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return NULL;
	h += 7;
	while (*h == ' ')
		h++;
	return h;
}

/* No NOW() here: a deterministic statement can be answered from MariaDB's query
 * cache, which any change to the key or the user (revocation, disabling)
 * invalidates at once. The times are compared with this host's clock instead. */
static const char SQL_KEY[] =
	"SELECT " AH_AUTH_KEY_COLS " FROM " AH_AUTH_KEY_FROM " WHERE k.key_id = ?";

static const char SQL_TOUCH[] =
	"UPDATE api_keys SET last_used_at = NOW(3) WHERE id = ?";

/* ms since the epoch as DATETIME(3) text, which sorts like the time it names. */
static void db_time(char out[32], int64_t ms)
{
	time_t sec = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&sec, &tm);
	size_t n = strftime(out, 32, "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(out + n, 32 - n, ".%03u", (unsigned)(ms % 1000));
}

/* DATETIME cells are "YYYY-MM-DD HH:MM:SS.fff": comparing the text compares times. */
static bool before(const char *dbtime, const char *than)
{
	return dbtime && strcmp(dbtime, than) < 0;
}

/* Checks the key row (hash, expiry), touches last_used_at at most once a minute
 * and sets r->user. */
static int accept_key(ah_req *r, const char *tok, const ah_rows *rows, const char **why)
{
	unsigned char want[AH_KEYHASH_BYTES];
	ah_crypto_key_hash(want, tok, strlen(tok));
	if (rows->n != 1 || rows->len[0][1] != AH_KEYHASH_BYTES ||
	    sodium_memcmp(want, rows->v[0][1], AH_KEYHASH_BYTES) != 0) {
		*why = "Invalid API key";
		return AH_EDENIED;
	}
	char **v = rows->v[0];
	char now[32], stale[32];
	int64_t ms = ah_now_ms();
	db_time(now, ms);
	if (before(v[3], now)) {
		*why = "API key expired";
		return AH_EDENIED;
	}
	db_time(stale, ms - 60000);
	if (!v[2] || before(v[2], stale))
		ah_db_exec(r->db, NULL, SQL_TOUCH, "s", v[0]); /* best effort */
	r->user = ah_user_from_row(r->arena, v + 4);
	r->api_key_id = v[0]; /* in the arena with the rows: who started a deploy */
	return 0;
}

/* Shared by both entry points; scope NULL = a plain key lookup. */
static int authenticate(ah_req *r, const ah_scope *scope, const char *scope_param,
                        const char **why)
{
	const char *tok = bearer_token(r);
	if (!tok) {
		*why = "Not authenticated";
		return AH_EDENIED;
	}
	/* Anything else with the outline of a JWS is a token from the identity provider. */
	if (strncmp(tok, "ahk_", 4) != 0 && ah_jwt_looks_like(tok))
		return ah_auth_jwt(r, tok, why);
	if (!ah_auth_key_shape_ok(tok)) {
		*why = "Invalid API key";
		return AH_EDENIED;
	}
	char key_id[9];
	memcpy(key_id, tok + 4, 8);
	key_id[8] = '\0';
	ah_rows rows;
	int rc = scope ? ah_db_query(r->db, r->arena, &rows, scope->sql, "ss", scope_param, key_id)
	                   : ah_db_query(r->db, r->arena, &rows, SQL_KEY, "s", key_id);
	if (rc != 0)
		return AH_EFAIL;
	if ((rc = accept_key(r, tok, &rows, why)) != 0)
		return rc;
	if (scope) {
		char **row = rows.v[0] + AH_AUTH_KEY_NCOLS;
		r->scope_loaded = true;
		/* The LEFT JOIN leaves every scoped column NULL when nothing matched. */
		r->scope = NULL;
		if (row[0]) {
			r->scope = ah_alloc(r->arena, scope->size);
			ah_record_fill(r->scope, scope->cols, scope->ncols, row);
		}
		if (scope->nextra && rows.ncols >= AH_AUTH_KEY_NCOLS + scope->ncols + scope->nextra)
			r->scope_extra = row + scope->ncols;
	}
	return 0;
}

int ah_auth_request(ah_req *r, const char **why)
{
	return authenticate(r, NULL, NULL, why);
}

int ah_auth_request_scoped(ah_req *r, const ah_scope *scope, const char *scope_param,
                           const char **why)
{
	return authenticate(r, scope, scope_param, why);
}
