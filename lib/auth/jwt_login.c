/* JWT login: the configured key sources and policy, read once per worker, and
 * the user a verified token stands for. An identity is the pair (iss, sub); the
 * first login of an unknown identity creates a user with the token's email. When
 * a user with that email exists already (one made by the admin command line, say),
 * the identity is linked to it only if the operator turned on jwt_link_by_email
 * and the token says email_verified: true; otherwise the login is refused, since
 * whoever can sign tokens (or claim an address at the provider) would otherwise
 * take over the account. `agenthost-admin user identities|unlink` shows and
 * removes links. */
#include "auth/user.h"
#include "auth/jwt.h"
#include "core/plans.h"
#include "core/log.h"
#include "core/util.h"

#include <stdio.h>
#include <string.h>

static struct jwt_conf {
	bool loaded, enabled, link_by_email;
	unsigned char secret[4096];
	size_t secret_len;         /* 0: HS256 off */
	const char *jwks_url, *issuer, *audience, *email_claim, *plan;
	long long leeway;
} conf;


/* The secret's bytes as written, less trailing whitespace (a file's newline). */
static void load_secret(const ah_config *cfg)
{
	const char *inline_secret = ah_set_opt(ah_settings_of(cfg)->jwt.hs256_secret);
	const char *file = ah_set_opt(ah_settings_of(cfg)->jwt.hs256_secret_file);
	size_t n = 0;
	if (inline_secret) {
		n = strlen(inline_secret);
		n = n < sizeof(conf.secret) ? n : 0;
		memcpy(conf.secret, inline_secret, n);
	} else if (file) {
		FILE *f = fopen(file, "rb");
		n = f ? fread(conf.secret, 1, sizeof(conf.secret), f) : 0;
		if (!f)
			ah_log_warn("cannot read jwt_hs256_secret_file %s; HS256 tokens are refused", file);
		else
			fclose(f);
	}
	while (n > 0 && (conf.secret[n - 1] == '\n' || conf.secret[n - 1] == '\r' ||
	                 conf.secret[n - 1] == ' ' || conf.secret[n - 1] == '\t'))
		n--;
	/* RFC 7518 3.2: an HS256 key shorter than the hash is not acceptable. */
	if (n > 0 && n < 32) {
		ah_log_warn("the HS256 secret is shorter than 32 bytes; HS256 tokens are refused");
		n = 0;
	}
	conf.secret_len = n;
}

static const struct jwt_conf *conf_get(const ah_config *cfg)
{
	if (conf.loaded)
		return &conf;
	conf.loaded = true;
	load_secret(cfg);
	conf.jwks_url = ah_set_opt(ah_settings_of(cfg)->jwt.jwks_url);
	conf.issuer = ah_set_opt(ah_settings_of(cfg)->jwt.issuer);
	conf.audience = ah_set_opt(ah_settings_of(cfg)->jwt.audience);
	conf.email_claim = ah_set_opt(ah_settings_of(cfg)->jwt.email_claim);
	conf.plan = ah_set_opt(ah_settings_of(cfg)->jwt.default_plan);
	conf.leeway = ah_settings_of(cfg)->jwt.leeway_seconds;
	conf.link_by_email = ah_settings_of(cfg)->jwt.link_by_email;
	conf.enabled = conf.secret_len > 0 || conf.jwks_url;
	return &conf;
}

/* Verifies with what is at hand, then with the cached key set, then with a
 * fresh one: an unknown kid usually means the provider rotated its keys. */
static int verify(ah_jwt_claims *c, ah_req *r, const char *tok, const struct jwt_conf *jc,
                  const char **why)
{
	ah_jwt_policy p = {
		.hs256_secret = jc->secret_len ? jc->secret : NULL,
		.hs256_secret_len = jc->secret_len,
		.issuer = jc->issuer,
		.audience = jc->audience,
		.email_claim = jc->email_claim,
		.leeway = jc->leeway,
		.now = ah_now_ms() / 1000,
	};
	int rc = ah_jwt_verify(c, r->arena, tok, &p, why);
	for (int refresh = 0; rc == AH_ENOTFOUND && jc->jwks_url && refresh < 2; refresh++) {
		ah_jwks_cached(&p.keys, r->cfg, refresh);
		rc = ah_jwt_verify(c, r->arena, tok, &p, why);
	}
	if (rc != 0)
		return AH_EDENIED;
	return 0;
}

static const char SQL_IDENTITY[] =
	"SELECT " AH_USER_COLS " FROM user_identities i JOIN users u ON u.id = i.user_id"
	" WHERE i.issuer = ? AND i.subject = ?";
static const char SQL_IDENTITY_EXISTS[] =
	"SELECT 1 FROM user_identities WHERE issuer = ? AND subject = ?";
static const char SQL_USER_BY_EMAIL[] = "SELECT id FROM users WHERE email = ?";
static const char SQL_USER_INSERT[] =
	"INSERT INTO users (id, email, plan, quota_bytes, created_at, updated_at)"
	" VALUES (?, ?, ?, ?, NOW(3), NOW(3))";
static const char SQL_IDENTITY_INSERT[] =
	"INSERT INTO user_identities (issuer, subject, user_id, created_at) VALUES (?, ?, ?, NOW(3))";

/* 0 with r->user set, AH_ENOTFOUND for an unknown identity, or AH_EFAIL. */
static int find_user(ah_req *r, const ah_jwt_claims *c)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, SQL_IDENTITY, "ss", c->iss, c->sub) != 0)
		return AH_EFAIL;
	if (rows.n != 1)
		return AH_ENOTFOUND;
	r->user = ah_user_from_row(r->arena, rows.v[0]);
	return 0;
}

/* The configured plan for new users, when it names one (quotas: core/plans.h). */
static const char *default_plan(const struct jwt_conf *jc)
{
	const char *p = jc->plan;
	if (p && (strcmp(p, "free") == 0 || strcmp(p, "pro") == 0 || strcmp(p, "enterprise") == 0))
		return p;
	if (p)
		ah_log_warn("jwt_default_plan %s is not free, pro or enterprise; using free", p);
	return "free";
}

/* Whether a new identity may take the existing user with its email. */
static int may_link(const ah_jwt_claims *c, const struct jwt_conf *jc, const char *user_id,
                    const char **why)
{
	if (!jc->link_by_email) {
		ah_log_info("JWT login refused: a new identity carries the email of user %s"
		            " and jwt_link_by_email is off", user_id);
		*why = "An account with this email exists and is not linked to this identity";
		return AH_EDENIED;
	}
	if (c->email_verified != AH_JWT_EMAIL_VERIFIED) {
		*why = "Token email is not verified";
		return AH_EDENIED;
	}
	return 0;
}

/* The user id for a new identity: a new user, or the one with this email when
 * may_link allows it (AH_EDENIED with *why when not). *linked says which. */
static int user_for_email(char **out, bool *linked, ah_req *r, const ah_jwt_claims *c,
                          const struct jwt_conf *jc, const char **why)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, SQL_USER_BY_EMAIL, "s", c->email) != 0)
		return AH_EFAIL;
	*linked = rows.n == 1;
	if (rows.n == 1) {
		*out = rows.v[0][0];
		/* A racing first login of this same identity may have made the user (and
		 * its identity, in one transaction): then the caller looks again. */
		if (ah_db_query(r->db, r->arena, &rows, SQL_IDENTITY_EXISTS, "ss", c->iss, c->sub) != 0)
			return AH_EFAIL;
		return rows.n == 1 ? AH_ECONFLICT : may_link(c, jc, *out, why);
	}
	const char *plan = default_plan(jc);
	*out = ah_id_new(r->arena, "usr");
	return ah_db_exec(r->db, NULL, SQL_USER_INSERT, "sssi", *out, c->email, plan,
	                  ah_plan_quota(plan));
}

/* One transaction. A racing login for the same identity or email shows up as
 * AH_ECONFLICT on a unique key; the caller then looks again and finds its work. */
static int link_identity(ah_req *r, const ah_jwt_claims *c, const struct jwt_conf *jc,
                         const char **why)
{
	char *user_id = NULL;
	bool linked = false;
	if (ah_db_begin(r->db) != 0)
		return AH_EFAIL;
	int rc = user_for_email(&user_id, &linked, r, c, jc, why);
	if (rc == 0)
		rc = ah_db_exec(r->db, NULL, SQL_IDENTITY_INSERT, "sss", c->iss, c->sub, user_id);
	if (rc == 0)
		rc = ah_db_commit(r->db);
	if (rc != 0)
		ah_db_rollback(r->db);
	else
		ah_log_info("JWT login: new identity for %s user %s", linked ? "existing" : "new",
		            user_id);
	return rc == AH_ECONFLICT || rc == AH_EDENIED ? rc : rc != 0 ? AH_EFAIL : 0;
}

static bool email_ok(const char *e)
{
	const char *at = strchr(e, '@');
	return at && at != e && at[1] && !strchr(at + 1, '@') && strlen(e) <= 320 &&
	       !strpbrk(e, " \t\r\n");
}

static int login(ah_req *r, const ah_jwt_claims *c, const struct jwt_conf *jc, const char **why)
{
	for (int attempt = 0; attempt < 3; attempt++) {
		int rc = find_user(r, c);
		if (rc != AH_ENOTFOUND)
			return rc;
		/* A new user's email is the provider's word for it, so an address it
		 * says is unverified is refused here, and linking needs more (may_link). */
		if (!c->email || !email_ok(c->email)) {
			*why = "Token has no email claim";
			return AH_EDENIED;
		}
		if (c->email_verified == AH_JWT_EMAIL_UNVERIFIED) {
			*why = "Token email is not verified";
			return AH_EDENIED;
		}
		rc = link_identity(r, c, jc, why);
		if (rc != 0 && rc != AH_ECONFLICT)
			return rc;
	}
	return AH_EFAIL;
}

int ah_auth_jwt(ah_req *r, const char *tok, const char **why)
{
	const struct jwt_conf *jc = conf_get(r->cfg);
	ah_jwt_claims c;
	const char *msg = "Invalid token";
	/* *why is only written on a refusal: the dispatcher reads any value as one. */
	if (!jc->enabled || verify(&c, r, tok, jc, &msg) != 0) {
		*why = msg;
		return AH_EDENIED;
	}
	return login(r, &c, jc, why);
}
