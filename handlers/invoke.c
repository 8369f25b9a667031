/* POST /agents/{slug}/invoke (placeholder until invocations land). */
#include "agents.h"
#include "routes.h"

#include <string.h>

static int invoke(ah_req *r)
{
	char **a;
	int rc = ah_agent_load(r, &a);
	if (rc != 0)
		return rc;
	if (strcmp(a[AG_STATUS], "active") != 0)
		return ah_reply_error(r, 409, ah_sprintf(r->arena, "Agent is not active (status: %s)", a[AG_STATUS]));
	return ah_reply_error(r, 503, "Invocations are not available yet");
}

const ah_route ah_invoke_routes[] = {
	{"POST", "/agents/{slug}/invoke", invoke, AH_R_INVOKE, 16 * 1024 * 1024},
	{NULL, NULL, NULL, 0, 0},
};
