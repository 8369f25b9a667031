/* /api-keys: named API keys of the caller. A key is shown once, at creation;
 * afterwards only its public prefix. Deleting a key revokes it at once (the row
 * is gone, so the next lookup fails). */
#include "budgets.h"
#include "list.h"
#include "routes.h"
#include "core/util.h"
#include "crypto/crypto.h"
#include "db/record.h"

#include <string.h>

/* A key as the API shows it (never its hash). */
typedef struct ah_apikey {
	const char *id, *name, *key_id, *created_at, *last_used_at;
	const char *max_day, *max_month; /* budgets (budgets.h), NULL: none */
} ah_apikey;

#define APIKEY_COLS "id, name, key_id, created_at, last_used_at, max_cost_usd_per_day, max_cost_usd_per_month"
static const ah_col APIKEY_COLUMNS[] = {
	AH_COL_S("id", ah_apikey, id),
	AH_COL_S("name", ah_apikey, name),
	AH_COL_S("key_id", ah_apikey, key_id),
	AH_COL_S("created_at", ah_apikey, created_at),
	AH_COL_S("last_used_at", ah_apikey, last_used_at),
	AH_COL_S("max_cost_usd_per_day", ah_apikey, max_day),
	AH_COL_S("max_cost_usd_per_month", ah_apikey, max_month),
};
#define APIKEY_NCOLS (sizeof(APIKEY_COLUMNS) / sizeof(APIKEY_COLUMNS[0]))

/* Newest first: a deferred join for offset pages, a key range for cursors. */
#define APIKEY_COLS_K "k.id, k.name, k.key_id, k.created_at, k.last_used_at, k.max_cost_usd_per_day,"\
	" k.max_cost_usd_per_month"
enum { K_ID, K_NAME, K_KEY_ID, K_CREATED };
#define LIST_ORDER " ORDER BY k.created_at DESC, k.id DESC"
static const char SQL_LIST[] =
	"SELECT " APIKEY_COLS_K " FROM (SELECT id FROM api_keys WHERE user_id = ?"
	" ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?) p JOIN api_keys k ON k.id = p.id" LIST_ORDER;
static const char SQL_LIST_AFTER[] =
	"SELECT " APIKEY_COLS_K " FROM api_keys k FORCE INDEX (api_keys_user) WHERE k.user_id = ?"
	" AND k.created_at <= ? AND (k.created_at < ? OR k.id < ?)" LIST_ORDER " LIMIT ?";
static const char SQL_GET[] = "SELECT " APIKEY_COLS " FROM api_keys WHERE id = ?";
static const char SQL_GET_OWN[] = "SELECT " APIKEY_COLS " FROM api_keys WHERE id = ? AND user_id = ?";
static const char SQL_INSERT[] =
	"INSERT INTO api_keys (id, user_id, name, key_id, key_hash, created_at, max_cost_usd_per_day,"
	" max_cost_usd_per_month) VALUES (?, ?, ?, ?, ?, NOW(3), ?, ?)";
/* Each field only when given: COALESCE keeps the other, the flag allows null. */
static const char SQL_UPDATE[] =
	"UPDATE api_keys SET name = COALESCE(?, name),"
	" max_cost_usd_per_day = IF(?, ?, max_cost_usd_per_day),"
	" max_cost_usd_per_month = IF(?, ?, max_cost_usd_per_month) WHERE id = ? AND user_id = ?";
static const char SQL_DELETE[] = "DELETE FROM api_keys WHERE id = ? AND user_id = ?";

static json_object *key_json(ah_req *r, char *const *row)
{
	static bool checked;
	ah_apikey k;
	AH_RECORD_CHECK(checked, APIKEY_COLUMNS, APIKEY_NCOLS, APIKEY_COLS);
	ah_record_fill(&k, APIKEY_COLUMNS, APIKEY_NCOLS, row);
	json_object *o = json_object_new_object();
	ah_json_str(o, "id", k.id);
	ah_json_str(o, "name", k.name);
	ah_json_str(o, "prefix", ah_sprintf(r->arena, "ahk_%s", k.key_id));
	ah_json_time(r, o, "created_at", k.created_at);
	ah_json_time(r, o, "last_used_at", k.last_used_at);
	ah_budget_json(r, o, k.max_day, k.max_month);
	return o;
}

static json_object *key_row_json(ah_req *r, const ah_rows *rows, size_t i)
{
	return key_json(r, rows->v[i]);
}

static int list_keys(ah_req *r)
{
	static const ah_list list = {.page_sql = SQL_LIST, .after_sql = SQL_LIST_AFTER, .count_kind = "key",
	                             .time_col = K_CREATED, .id_col = K_ID, .to_json = key_row_json};
	return ah_list_keyset(r, &list, r->user->id, NULL, 0);
}

static int create_key(ah_req *r)
{
	static const char *const fields[] = {"name", AH_BUDGET_FIELDS, NULL};
	json_object *o = NULL;
	const char *name = NULL;
	ah_budget_in b = {0};
	/* The body is optional: POST with no body makes a key named "Default". */
	if (r->body_len > 0) {
		if (ah_body_object(r, &o, fields) != 0)
			return AH_EDONE;
		ah_field_str(r, o, "name", AH_F_NULLABLE, 1, 255, &name, NULL);
		ah_budget_fields(r, o, &b);
		if (ah_verr_reply(r) != 0)
			return AH_EDONE;
	}
	char *key_id;
	const char *key = ah_crypto_new_api_key(r->arena, &key_id);
	const char *id = ah_id_new(r->arena, "key");
	unsigned char hash[AH_KEYHASH_BYTES];
	ah_rows rows;
	ah_crypto_key_hash(hash, key, strlen(key));
	if (ah_db_exec(r->db, NULL, SQL_INSERT, "ssssbss", id, r->user->id, name ? name : "Default",
	               key_id, hash, sizeof(hash), b.day, b.month) != 0 ||
	    ah_db_query(r->db, r->arena, &rows, SQL_GET, "s", id) != 0 || rows.n != 1)
		return AH_EFAIL;
	json_object *out = json_object_new_object();
	json_object_object_add(out, "api_key", key_json(r, rows.v[0]));
	ah_json_str(out, "key", key);
	return ah_reply_json(r, 201, out);
}

/* PATCH: its name and budgets. A key may change its own budgets: the
 * budgets are the user's controls over what each key spends, not a grant. */
static int patch_key(ah_req *r)
{
	static const char *const fields[] = {"name", AH_BUDGET_FIELDS, NULL};
	json_object *o;
	const char *name = NULL;
	ah_budget_in b = {0};
	ah_rows rows;
	if (ah_body_object(r, &o, fields) != 0)
		return AH_EDONE;
	ah_field_str(r, o, "name", 0, 1, 255, &name, NULL);
	ah_budget_fields(r, o, &b);
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	if (ah_db_exec(r->db, NULL, SQL_UPDATE, "sisisss", name, (long long)b.has_day, b.day,
	               (long long)b.has_month, b.month, r->params[0], r->user->id) != 0 ||
	    ah_db_query(r->db, r->arena, &rows, SQL_GET_OWN, "ss", r->params[0], r->user->id) != 0)
		return AH_EFAIL;
	if (rows.n != 1)
		return ah_reply_error(r, 404, "API key not found");
	return ah_reply_json(r, 200, key_json(r, rows.v[0]));
}

static int delete_key(ah_req *r)
{
	unsigned long long n = 0;
	if (ah_db_exec(r->db, &n, SQL_DELETE, "ss", r->params[0], r->user->id) != 0)
		return AH_EFAIL;
	return n ? ah_reply_no_content(r) : ah_reply_error(r, 404, "API key not found");
}

const ah_route ah_api_keys_routes[] = {
	{"GET", "/api-keys", list_keys, 0, 0},
	{"POST", "/api-keys", create_key, 0, 0},
	{"PATCH", "/api-keys/{id}", patch_key, 0, 0},
	{"DELETE", "/api-keys/{id}", delete_key, 0, 0},
	{NULL, NULL, NULL, 0, 0},
};
