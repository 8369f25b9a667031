/* /agents/{slug}/secrets: per-agent environment variables, sealed at rest with
 * the master key (crypto_secretbox, a fresh nonce per value). Values are never
 * returned and never logged; only names and times are. */
#include "agents.h"
#include "list.h"
#include "routes.h"
#include "core/util.h"
#include "crypto/crypto.h"
#include "db/record.h"
#include "runner_calls.h"

#include <sodium.h>
#include <string.h>

#define SECRET_MAX (64 * 1024)
/* An agent's secrets are its sandbox's environment, whose exec takes at most
 * AH_SANDBOX_EXEC_BYTES_MAX (256 KiB) and AH_SANDBOX_EXEC_ARGS_MAX (1024)
 * variables (lib/sandbox/sandbox.h, which the API does not link): over that
 * the agent could not start at all. These caps leave room for what the
 * runner sets beside them (PATH, HOME, the model gateway's, ...) and argv. */
#define SECRETS_TOTAL_MAX (224 * 1024) /* names and values, each "NAME=value\0" */
#define SECRETS_COUNT_MAX 1000

/* A secret as the API shows it: never its value. */
typedef struct ah_secret {
	const char *name, *created_at, *updated_at;
} ah_secret;

#define SECRET_COLS "name, created_at, updated_at"
static const ah_col SECRET_COLUMNS[] = {
	AH_COL_S("name", ah_secret, name),
	AH_COL_S("created_at", ah_secret, created_at),
	AH_COL_S("updated_at", ah_secret, updated_at),
};
#define SECRET_NCOLS (sizeof(SECRET_COLUMNS) / sizeof(SECRET_COLUMNS[0]))

static const char SQL_LIST[] =
	"SELECT " SECRET_COLS " FROM secrets WHERE agent_id = ? ORDER BY name LIMIT ? OFFSET ?";
static const char SQL_COUNT[] = "SELECT COUNT(*) FROM secrets WHERE agent_id = ?";
static const char SQL_UPSERT[] =
	"INSERT INTO secrets (agent_id, name, nonce, ciphertext, created_at, updated_at)"
	" VALUES (?, ?, ?, ?, NOW(3), NOW(3))"
	" ON DUPLICATE KEY UPDATE nonce = VALUES(nonce), ciphertext = VALUES(ciphertext),"
	" updated_at = NOW(3)";
/* The agent's other secrets as environment bytes: a ciphertext is its value
 * and secretbox's 16-byte MAC. */
_Static_assert(crypto_secretbox_MACBYTES == 16, "SQL_OTHERS subtracts the MAC");
static const char SQL_OTHERS[] =
	"SELECT COUNT(*), COALESCE(SUM(LENGTH(name) + LENGTH(ciphertext) - 16 + 2), 0)"
	" FROM secrets WHERE agent_id = ? AND name <> ?";
static const char SQL_GET[] =
	"SELECT " SECRET_COLS " FROM secrets WHERE agent_id = ? AND name = ?";
static const char SQL_DELETE[] = "DELETE FROM secrets WHERE agent_id = ? AND name = ?";

static bool key_shape_ok(const char *k)
{
	size_t n = strlen(k);
	if (n < 1 || n > 128 || !((k[0] >= 'A' && k[0] <= 'Z') || (k[0] >= 'a' && k[0] <= 'z') || k[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++) {
		char c = k[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
			return false;
	}
	return true;
}

/* Names the sandbox sets itself: a secret must never override them. */
static bool key_reserved(ah_req *r, const char *k)
{
	const char *model = ah_settings_of(r->cfg)->model.key_name;
	return strcmp(k, model) == 0 || strcmp(k, "PATH") == 0 || strcmp(k, "HOME") == 0 ||
	       strcmp(k, "NODE_OPTIONS") == 0 || strncmp(k, "AGENTHOST_", 10) == 0;
}

static json_object *secret_json(ah_req *r, char *const *row)
{
	static bool checked;
	ah_secret s;
	AH_RECORD_CHECK(checked, SECRET_COLUMNS, SECRET_NCOLS, SECRET_COLS);
	ah_record_fill(&s, SECRET_COLUMNS, SECRET_NCOLS, row);
	json_object *o = json_object_new_object();
	ah_json_str(o, "key", s.name);
	ah_json_time(r, o, "created_at", s.created_at);
	ah_json_time(r, o, "updated_at", s.updated_at);
	return o;
}

static json_object *secret_row_json(ah_req *r, const ah_rows *rows, size_t i)
{
	return secret_json(r, rows->v[i]);
}

static int list_secrets(ah_req *r)
{
	const ah_agent *a;
	int rc = ah_agent_load(r, &a);
	return rc ? rc : ah_list_reply(r, SQL_COUNT, SQL_LIST, a->id, secret_row_json);
}

/* A warm agent's waiting processes hold the old environment: the runner drops
 * them now (its next call would not take them either: runner_client.h). */
static void retire_warm(ah_req *r, const ah_agent *a)
{
	if (a->min_warm > 0)
		ah_runner_retire_warm(r, a->id, a->runner_id);
}

/* 422 when the secret would leave the agent's environment past its
 * sandbox's room (two requests at once may still pass it together: the
 * runner then fails the call saying so). */
static int check_room(ah_req *r, const ah_agent *a, const char *key, const char *value)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, SQL_OTHERS, "ss", a->id, key) != 0 || rows.n != 1)
		return AH_EFAIL;
	long long n = ah_cell_ll(rows.v[0][0]) + 1;
	long long bytes = ah_cell_ll(rows.v[0][1]) + (long long)(strlen(key) + strlen(value) + 2);
	if (n > SECRETS_COUNT_MAX)
		ah_verr(r, "body", "key", ah_sprintf(r->arena, "An agent has at most %d secrets",
		        SECRETS_COUNT_MAX), "too_many_secrets");
	else if (bytes > SECRETS_TOTAL_MAX)
		ah_verr(r, "body", "value", ah_sprintf(r->arena, "The agent's secrets would total %lld bytes"
		        " (names and values); its sandbox's environment holds at most %d", bytes,
		        SECRETS_TOTAL_MAX), "secrets_too_large");
	return ah_verr_reply(r) != 0 ? AH_EDONE : 0;
}

static int set_secret(ah_req *r)
{
	static const char *const fields[] = {"key", "value", NULL};
	const ah_agent *a;
	json_object *o;
	const char *key, *value;
	int rc = ah_agent_load(r, &a);
	if (rc != 0 || (rc = ah_body_object(r, &o, fields)) != 0)
		return rc;
	if (ah_field_str(r, o, "key", AH_F_REQUIRED, 1, 128, &key, NULL) == 0) {
		if (!key_shape_ok(key))
			ah_verr(r, "body", "key", "String should match pattern '^[A-Za-z_][A-Za-z0-9_]{0,127}$'",
			        "string_pattern_mismatch");
		else if (key_reserved(r, key))
			ah_verr(r, "body", "key", "This name is reserved by the sandbox", "value_error");
	}
	ah_field_str(r, o, "value", AH_F_REQUIRED, 0, SECRET_MAX, &value, NULL);
	if (value && strlen(value) > SECRET_MAX)
		ah_verr(r, "body", "value", "Value should be at most 65536 bytes", "string_too_long");
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	if ((rc = check_room(r, a, key, value)) != 0)
		return rc;
	unsigned char nonce[AH_NONCE_BYTES], *ct;
	size_t ctlen;
	ah_rows rows;
	if (ah_crypto_seal(r->arena, nonce, &ct, &ctlen, value, strlen(value)) != 0 ||
	    ah_db_exec(r->db, NULL, SQL_UPSERT, "ssbb", a->id, key, nonce, (size_t)AH_NONCE_BYTES,
	               ct, ctlen) != 0 ||
	    ah_db_query(r->db, r->arena, &rows, SQL_GET, "ss", a->id, key) != 0 || rows.n != 1)
		return AH_EFAIL;
	retire_warm(r, a);
	return ah_reply_json(r, 201, secret_json(r, rows.v[0]));
}

static int delete_secret(ah_req *r)
{
	const ah_agent *a;
	unsigned long long n = 0;
	int rc = ah_agent_load(r, &a);
	if (rc != 0)
		return rc;
	if (ah_db_exec(r->db, &n, SQL_DELETE, "ss", a->id, r->params[1]) != 0)
		return AH_EFAIL;
	if (n)
		retire_warm(r, a);
	return n ? ah_reply_no_content(r) : ah_reply_error(r, 404, "Secret not found");
}

const ah_route ah_secrets_routes[] = {
	{"GET", "/agents/{slug}/secrets", list_secrets, 0, 0, AH_AGENT_SCOPE},
	{"POST", "/agents/{slug}/secrets", set_secret, 0, 0, AH_AGENT_SCOPE},
	{"DELETE", "/agents/{slug}/secrets/{key}", delete_secret, 0, 0, AH_AGENT_SCOPE},
	{NULL, NULL, NULL, 0, 0},
};
