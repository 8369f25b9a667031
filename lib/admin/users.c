/* User, identity and key commands of agenthost-admin. */
#include "admin/admin.h"
#include "core/plans.h"
#include "core/util.h"
#include "crypto/crypto.h"
#include "files/files.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char SQL_USER_INSERT[] =
	"INSERT INTO users (id, email, plan, quota_bytes, created_at, updated_at)"
	" VALUES (?, ?, ?, ?, NOW(3), NOW(3))";
static const char SQL_USER_BY_EMAIL[] = "SELECT id FROM users WHERE email = ?";
static const char SQL_USER_DISABLE[] =
	"UPDATE users SET disabled = ?, updated_at = NOW(3) WHERE email = ?";
static const char SQL_IDENTITIES[] =
	"SELECT i.issuer, i.subject, i.created_at FROM user_identities i"
	" WHERE i.user_id = ? ORDER BY i.created_at, i.issuer, i.subject";
static const char SQL_UNLINK[] =
	"DELETE FROM user_identities WHERE user_id = ? AND issuer = ? AND subject = ?";
static const char SQL_KEY_INSERT[] =
	"INSERT INTO api_keys (id, user_id, name, key_id, key_hash, created_at)"
	" VALUES (?, ?, ?, ?, ?, NOW(3))";

static bool email_ok(const char *e)
{
	const char *at = strchr(e, '@');
	return at && at != e && at[1] && !strchr(at + 1, '@') && strlen(e) <= 320 &&
	       !strpbrk(e, " \t\r\n");
}

static int insert_key(ah_admin *ad, const char *user_id, const char *name)
{
	char *key_id;
	const char *key = ah_crypto_new_api_key(ad->arena, &key_id);
	unsigned char hash[AH_KEYHASH_BYTES];
	ah_crypto_key_hash(hash, key, strlen(key));
	if (ah_db_exec(ad->db, NULL, SQL_KEY_INSERT, "ssssb", ah_id_new(ad->arena, "key"), user_id,
	               name, key_id, hash, sizeof(hash)) != 0) {
		fprintf(stderr, "agenthost-admin: cannot store the key: %s\n", ah_db_error(ad->db));
		return 1;
	}
	printf("%s\n", key);
	return 0;
}

int ah_admin_user_create(ah_admin *ad, const char *email, const char *plan, const char *q)
{
	long long quota = ah_plan_quota(plan);
	if (quota < 0 || !email_ok(email) || (q && (ah_parse_ll(&quota, q) != 0 || quota < 0))) {
		fprintf(stderr, "agenthost-admin: need a valid EMAIL, --plan free|pro|enterprise "
		        "and a non-negative --quota-bytes\n");
		return 2;
	}
	const char *id = ah_id_new(ad->arena, "usr");
	int rc = ah_db_exec(ad->db, NULL, SQL_USER_INSERT, "sssi", id, email, plan, quota);
	if (rc == AH_ECONFLICT) {
		fprintf(stderr, "agenthost-admin: a user with email %s exists; "
		        "use `key create` for another key\n", email);
		return 1;
	}
	if (rc != 0) {
		fprintf(stderr, "agenthost-admin: %s\n", ah_db_error(ad->db));
		return 1;
	}
	printf("created user %s (%s, plan %s)\n", id, email, plan);
	return insert_key(ad, id, "Default");
}

int ah_admin_user_set_disabled(ah_admin *ad, const char *email, int disabled)
{
	unsigned long long n = 0;
	if (ah_db_exec(ad->db, &n, SQL_USER_DISABLE, "is", (long long)disabled, email) != 0 || n == 0) {
		fprintf(stderr, "agenthost-admin: no user %s\n", email);
		return 1;
	}
	return 0;
}

/* The id of the user with this email, or NULL (with a message on stderr). */
static const char *user_id(ah_admin *ad, const char *email)
{
	ah_rows rows;
	if (ah_db_query(ad->db, ad->arena, &rows, SQL_USER_BY_EMAIL, "s", email) != 0 || rows.n != 1) {
		fprintf(stderr, "agenthost-admin: no user %s\n", email);
		return NULL;
	}
	return rows.v[0][0];
}

int ah_admin_key_create(ah_admin *ad, const char *email, const char *name)
{
	const char *id = user_id(ad, email);
	return id ? insert_key(ad, id, name) : 1;
}

/* One line per JWT identity of the user: issuer, subject, created (tab-separated,
 * an identity without iss has an empty issuer). */
int ah_admin_user_identities(ah_admin *ad, const char *email)
{
	const char *id = user_id(ad, email);
	ah_rows rows;
	if (!id)
		return 1;
	if (ah_db_query(ad->db, ad->arena, &rows, SQL_IDENTITIES, "s", id) != 0) {
		fprintf(stderr, "agenthost-admin: %s\n", ah_db_error(ad->db));
		return 1;
	}
	for (size_t i = 0; i < rows.n; i++)
		printf("%s\t%s\t%s\n", rows.v[i][0], rows.v[i][1], rows.v[i][2]);
	return 0;
}

/* Removes one identity of the user; its next login is a first login again. The
 * user, its keys and its other identities stay. */
int ah_admin_user_unlink(ah_admin *ad, const char *email, const char *issuer, const char *subject)
{
	const char *id = user_id(ad, email);
	unsigned long long n = 0;
	if (!id)
		return 1;
	if (ah_db_exec(ad->db, &n, SQL_UNLINK, "sss", id, issuer, subject) != 0) {
		fprintf(stderr, "agenthost-admin: %s\n", ah_db_error(ad->db));
		return 1;
	}
	if (n == 0) {
		fprintf(stderr, "agenthost-admin: user %s has no identity (%s, %s)\n", email, issuer, subject);
		return 1;
	}
	printf("unlinked (%s, %s) from %s\n", issuer, subject, email);
	return 0;
}

/* ---- user delete ---- */

static const char SQL_AGENTS_OF[] = "SELECT id FROM agents WHERE user_id = ?";
static const char SQL_AGENT_DELETE[] =
	"DELETE FROM agents WHERE id = ? RETURNING code_sha256, image_sha256";
static const char SQL_USER_DELETE[] = "DELETE FROM users WHERE id = ?";
/* Images the agent's deploy records hold (handlers/deploys.c). */
static const char SQL_KEPT_IMAGES[] =
	"SELECT image_sha256 FROM deploys WHERE agent_id = ? AND image_kept = 1";

/* One agent of the user: its row (with the code and image references it held
 * then), its uploaded code, its history blobs and those references. */
static int delete_agent(ah_admin *ad, const ah_store *s, const char *agent, ah_err *err)
{
	ah_rows gone, kept;
	int released;
	if (ah_db_query(ad->db, ad->arena, &kept, SQL_KEPT_IMAGES, "s", agent) != 0 ||
	    ah_db_query(ad->db, ad->arena, &gone, SQL_AGENT_DELETE, "s", agent) != 0)
		return ah_err_set(err, AH_EFAIL, "%s", ah_db_error(ad->db));
	unlink(ah_sprintf(ad->arena, "%s/code/%s.tar.gz", ah_settings_of(ad->cfg)->host.data_dir, agent));
	if (ah_history_blobs_sweep(ad->db, s, ad->arena, agent, 500, INT_MAX, &released, err) != 0)
		return AH_EFAIL;
	/* Each kept image's reference is its record's; the agent's own image
	 * holds one only when no record does (deployed before records). */
	bool recorded = false;
	for (size_t i = 0; i < kept.n; i++) {
		if (ah_blob_drop(ad->db, s, ah_cell(&kept, i, 0), err) != 0)
			return AH_EFAIL;
		recorded |= gone.n == 1 && ah_cell(&gone, 0, 1) &&
		            strcmp(ah_cell(&kept, i, 0), ah_cell(&gone, 0, 1)) == 0;
	}
	for (size_t i = 0; i < gone.n; i++)
		if (ah_blob_drop(ad->db, s, ah_cell(&gone, i, 0), err) != 0 ||
		    (!recorded && ah_blob_drop(ad->db, s, ah_cell(&gone, i, 1), err) != 0))
			return AH_EFAIL;
	return 0;
}

/* Everything of the user that the row's cascade does not reach, in the
 * order that never leaves bytes without a row pointing at them: files (bytes
 * and blob references) first, then each agent (delete_agent), the user's row
 * last, so that a run that stopped half-way is finished by running it again.
 * The runners' minute sweep removes the agents' images and sandboxes once
 * the rows are gone. */
static int delete_user(ah_admin *ad, const ah_store *s, const char *id, ah_err *err)
{
	ah_rows agents;
	int files = 0;
	if (ah_files_delete_for_user(ad->db, s, ad->arena, id, &files, err) != 0)
		return AH_EFAIL;
	if (ah_db_query(ad->db, ad->arena, &agents, SQL_AGENTS_OF, "s", id) != 0)
		return ah_err_set(err, AH_EFAIL, "%s", ah_db_error(ad->db));
	for (size_t i = 0; i < agents.n; i++)
		if (delete_agent(ad, s, agents.v[i][0], err) != 0)
			return AH_EFAIL;
	if (ah_db_exec(ad->db, NULL, SQL_USER_DELETE, "s", id) != 0)
		return ah_err_set(err, AH_EFAIL, "%s", ah_db_error(ad->db));
	printf("deleted user %s: %zu agents, %d files; runners remove the agents' images "
	       "and sandboxes within a minute\n", id, agents.n, files);
	return 0;
}

int ah_admin_user_delete(ah_admin *ad, const char *email, bool confirmed)
{
	if (!confirmed) {
		fprintf(stderr, "agenthost-admin: `user delete` removes the user's agents, history, "
		        "files and keys for good; add --yes to do it\n");
		return 2;
	}
	const char *id = user_id(ad, email);
	ah_store *s;
	ah_err err = {0};
	if (!id)
		return 1;
	if (ah_store_open(&s, ad->cfg, &err) != 0) {
		fprintf(stderr, "agenthost-admin: file store: %s\n", err.msg);
		return 1;
	}
	int rc = delete_user(ad, s, id, &err);
	ah_store_close(s);
	if (rc != 0) {
		fprintf(stderr, "agenthost-admin: %s (run it again to finish)\n", err.msg);
		return 1;
	}
	return 0;
}
