/* /users/me: the authenticated user's own record. Users are made by the admin
 * command line (agenthost-admin user create). The user's budgets (budgets.h)
 * are the user's own: a cap a user puts on their own spending, which they may
 * raise or clear as they may any key's or agent's; an operator's limit on a
 * user is the plan. */
#include "budgets.h"
#include "routes.h"

static const char SQL_BUDGETS[] =
	"SELECT max_cost_usd_per_day, max_cost_usd_per_month FROM users WHERE id = ?";
static const char SQL_UPDATE[] =
	"UPDATE users SET max_cost_usd_per_day = IF(?, ?, max_cost_usd_per_day),"
	" max_cost_usd_per_month = IF(?, ?, max_cost_usd_per_month) WHERE id = ?";

static int get_me(ah_req *r)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, SQL_BUDGETS, "s", r->user->id) != 0 || rows.n != 1)
		return AH_EFAIL;
	json_object *o = json_object_new_object();
	ah_json_str(o, "id", r->user->id);
	ah_json_str(o, "email", r->user->email);
	ah_json_str(o, "plan", r->user->plan);
	ah_json_int(o, "quota_bytes", r->user->quota_bytes);
	ah_json_time(r, o, "created_at", r->user->created_at);
	ah_budget_json(r, o, rows.v[0][0], rows.v[0][1]);
	return ah_reply_json(r, 200, o);
}

static int patch_me(ah_req *r)
{
	static const char *const fields[] = {AH_BUDGET_FIELDS, NULL};
	json_object *o;
	ah_budget_in b = {0};
	if (ah_body_object(r, &o, fields) != 0)
		return AH_EDONE;
	ah_budget_fields(r, o, &b);
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	if (ah_db_exec(r->db, NULL, SQL_UPDATE, "isiss", (long long)b.has_day, b.day,
	               (long long)b.has_month, b.month, r->user->id) != 0)
		return AH_EFAIL;
	return get_me(r);
}

const ah_route ah_users_routes[] = {
	{"GET", "/users/me", get_me, 0, 0},
	{"PATCH", "/users/me", patch_me, 0, 0},
	{NULL, NULL, NULL, 0, 0},
};
