/* /users/me: the authenticated user's own record. Users are made by the admin
 * command line (agenthost-admin user create). */
#include "routes.h"

static int get_me(ah_req *r)
{
	json_object *o = json_object_new_object();
	ah_json_str(o, "id", r->user->id);
	ah_json_str(o, "email", r->user->email);
	ah_json_str(o, "plan", r->user->plan);
	ah_json_int(o, "quota_bytes", r->user->quota_bytes);
	ah_json_time(r, o, "created_at", r->user->created_at);
	return ah_reply_json(r, 200, o);
}

const ah_route ah_users_routes[] = {
	{"GET", "/users/me", get_me, 0, 0},
	{NULL, NULL, NULL, 0, 0},
};
