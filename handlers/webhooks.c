/* Webhooks (issue 28): the user's signing secret (POST /users/me/webhook-
 * secret, shown once), an agent's delivery attempts (GET /agents/{slug}/
 * webhook-deliveries), and the webhook_url field that invoke and agents
 * read. Rows: schema/025_webhooks.sql; the sending: lib/webhooks/daemon.c. */
#include "webhooks.h"
#include "agents.h"
#include "list.h"
#include "routes.h"
#include "core/log.h"
#include "core/util.h"
#include "webhooks/webhooks.h"

#include <string.h>

#define DELIVERY_COLS                                                                     \
	"d.id, d.created_at, d.invocation_id, d.url, d.state, d.attempts, d.last_status_code," \
	" d.last_error, d.attempt_log, d.updated_at, d.delivered_at, d.next_attempt_at"
enum { W_ID, W_CREATED, W_INV, W_URL, W_STATE, W_ATTEMPTS, W_CODE, W_ERROR, W_LOG, W_UPDATED,
       W_DELIVERED, W_NEXT };
#define DELIVERY_ORDER " ORDER BY d.created_at DESC, d.id DESC"
static const char SQL_PAGE[] =
	"SELECT " DELIVERY_COLS " FROM (SELECT id FROM webhook_deliveries WHERE agent_id = ?"
	" ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?) k JOIN webhook_deliveries d"
	" ON d.id = k.id" DELIVERY_ORDER;
static const char SQL_AFTER[] =
	"SELECT " DELIVERY_COLS " FROM webhook_deliveries d FORCE INDEX (webhook_deliveries_agent)"
	" WHERE d.agent_id = ? AND d.created_at <= ? AND (d.created_at < ? OR d.id < ?)"
	DELIVERY_ORDER " LIMIT ?";
static const char SQL_COUNT[] = "SELECT COUNT(*) FROM webhook_deliveries WHERE agent_id = ?";

void ah_webhook_url_field(ah_req *r, json_object *o, const char **out, bool *has)
{
	ah_err err = {0};
	*out = NULL;
	if (ah_field_str(r, o, "webhook_url", AH_F_NULLABLE, 1, AH_WEBHOOK_URL_MAX, out, has) != 0 ||
	    !*out)
		return;
	if (ah_webhook_url_check(*out, &ah_settings_of(r->cfg)->webhook, &err) != 0) {
		ah_verr(r, "body", "webhook_url", ah_strdup(r->arena, err.msg), "url_parsing");
		return;
	}
	/* A delivery no receiver could verify is worth nothing: the secret first. */
	int rc = ah_webhook_secret_exists(r->db, r->arena, r->user->id);
	if (rc == AH_ENOTFOUND)
		ah_verr(r, "body", "webhook_url", "Create a webhook signing secret first: "
		        "POST /api/v1/users/me/webhook-secret", "value_error");
	else if (rc != 0)
		ah_log_error("cannot read the webhook secret of %s: %s", r->user->id, ah_db_error(r->db));
}

void ah_webhook_queue(ah_req *r, const char *agent_id, const char *inv_id, const char *url,
                      json_object *record)
{
	size_t len;
	ah_err err = {0};
	const char *text = json_object_to_json_string_length(record, JSON_C_TO_STRING_PLAIN, &len);
	if (ah_webhook_enqueue(r->db, r->arena, r->user->id, agent_id, inv_id, url, text, len, NULL,
	                       &err) != 0)
		ah_log_error("inv=%s: cannot queue its webhook: %s", inv_id, err.msg);
}

static int rotate_secret(ah_req *r)
{
	const char *secret;
	ah_err err = {0};
	if (ah_webhook_secret_rotate(r->db, r->arena, r->user->id, &secret, &err) != 0) {
		ah_log_error("cannot make a webhook secret: %s", err.msg);
		return AH_EFAIL;
	}
	json_object *o = json_object_new_object();
	ah_json_str(o, "secret", secret);
	ah_json_str(o, "created_at", ah_now_rfc3339(r->arena));
	return ah_reply_json(r, 201, o);
}

static json_object *delivery_json(ah_req *r, const ah_rows *rows, size_t i)
{
	json_object *o = json_object_new_object();
	const char *state = ah_cell(rows, i, W_STATE);
	ah_json_str(o, "id", ah_cell(rows, i, W_ID));
	ah_json_str(o, "invocation_id", ah_cell(rows, i, W_INV));
	ah_json_str(o, "url", ah_cell(rows, i, W_URL));
	ah_json_str(o, "status", state);
	ah_json_int(o, "attempt_count", ah_cell_ll(ah_cell(rows, i, W_ATTEMPTS)));
	if (ah_cell(rows, i, W_CODE))
		ah_json_int(o, "last_status_code", ah_cell_ll(ah_cell(rows, i, W_CODE)));
	else
		json_object_object_add(o, "last_status_code", NULL);
	ah_json_str(o, "last_error", ah_cell(rows, i, W_ERROR));
	json_object *log = json_tokener_parse(ah_cell(rows, i, W_LOG));
	json_object_object_add(o, "attempts", log && json_object_is_type(log, json_type_array)
	                                          ? log : json_object_new_array());
	ah_json_time(r, o, "created_at", ah_cell(rows, i, W_CREATED));
	ah_json_time(r, o, "updated_at", ah_cell(rows, i, W_UPDATED));
	ah_json_time(r, o, "delivered_at", ah_cell(rows, i, W_DELIVERED));
	ah_json_time(r, o, "next_attempt_at",
	             strcmp(state, "pending") == 0 ? ah_cell(rows, i, W_NEXT) : NULL);
	return o;
}

static int list_deliveries(ah_req *r)
{
	const ah_agent *a;
	int rc = ah_agent_load(r, &a);
	static const ah_list list = {.page_sql = SQL_PAGE, .after_sql = SQL_AFTER, .count_sql = SQL_COUNT,
	                             .time_col = W_CREATED, .id_col = W_ID, .to_json = delivery_json};
	return rc ? rc : ah_list_keyset(r, &list, a->id, NULL, 0);
}

const ah_route ah_webhooks_routes[] = {
	{"POST", "/users/me/webhook-secret", rotate_secret, 0, 0},
	{"GET", "/agents/{slug}/webhook-deliveries", list_deliveries, 0, 0, AH_AGENT_SCOPE},
	{NULL, NULL, NULL, 0, 0},
};
