/* The runner protocol's destroy operations (ops.h): a session's sandbox, an
 * agent's sandboxes and warm processes (and, when it is deleted, its images),
 * or only its warm processes. */
#include "runner/ops.h"
#include "runner/egress.h"
#include "runner/fuse.h"
#include "runner/run_req.h"
#include "runner/sandboxes.h"
#include "runner/warm.h"
#include "core/json.h"
#include "core/log.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static json_object *ok_answer(void)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(1));
	return o;
}

json_object *ah_op_destroy_session(json_object *req)
{
	const char *agent = ah_json_get_str(req, "agent_id"), *session = ah_json_get_str(req, "session");
	if (!ah_run_token_ok(agent, 32, "_") || !ah_run_token_ok(session, 128, "._:-"))
		return ah_op_error(AH_RPC_INVALID, "invalid agent_id or session");
	int n = ah_sandboxes_destroy_session(agent, session);
	ah_log_info("agent=%s session=%s: destroy_session (%d sandbox)", agent, session, n);
	return ok_answer();
}

/* A rollback left this image of the agent (the one it ran): its directory
 * goes as a redeploy's replaced one does; kept in the file store, it is
 * fetched again if a rollback returns to it. Only ever a directory of
 * <data_dir>/images/<agent>/, whatever the request says. */
static void retire_left_image(const struct ah_runner *r, const char *agent, const char *image)
{
	char dir[PATH_MAX];
	int n = snprintf(dir, sizeof dir, "%s/images/%s/", r->data_dir, agent);
	if (!image || n < 0 || (size_t)n >= sizeof dir || strncmp(image, dir, (size_t)n) != 0 ||
	    !ah_run_token_ok(image + n, 20, ""))
		return;
	ah_sandboxes_retire_image(image);
}

/* With purge (the agent is deleted) its images go too, now rather than at the
 * next sweep (heartbeat.c), which stays the net under a missed call. */
json_object *ah_op_destroy_agent(const struct ah_runner *r, json_object *req)
{
	const char *agent = ah_json_get_str(req, "agent_id");
	json_object *purge = NULL;
	if (!ah_run_token_ok(agent, 32, "_"))
		return ah_op_error(AH_RPC_INVALID, "invalid agent_id");
	int n = ah_warm_destroy_agent(agent);
	ah_fuse_retain(agent, NULL); /* its bucket mounts: the next call starts them again */
	ah_log_info("agent=%s: destroy_agent (%d sandboxes)", agent, n);
	retire_left_image(r, agent, ah_json_get_str(req, "retire_image"));
	if (json_object_object_get_ex(req, "purge", &purge) && json_object_get_boolean(purge)) {
		ah_log_info("agent=%s deleted: removing its images", agent);
		ah_image_purge_agent(r, agent);
		ah_egress_forget(agent);
	}
	json_object *ans = ok_answer();
	json_object_object_add(ans, "destroyed", json_object_new_int64(n));
	return ans;
}

/* The API changed what the agent's warm processes were started with (a
 * secret, min_warm): they go now, and its next call starts new ones. */
json_object *ah_op_retire_warm(json_object *req)
{
	const char *agent = ah_json_get_str(req, "agent_id");
	if (!ah_run_token_ok(agent, 32, "_"))
		return ah_op_error(AH_RPC_INVALID, "invalid agent_id");
	ah_warm_forget(agent);
	return ok_answer();
}
