/* The agent record, shared by every resource nested under /agents/{slug}. */
#ifndef AH_HANDLERS_AGENTS_H
#define AH_HANDLERS_AGENTS_H

#include "http/http.h"

/* Columns of AH_AGENT_COLS, in order. */
enum {
	AG_ID, AG_NAME, AG_SLUG, AG_DESCRIPTION, AG_SOURCE_TYPE, AG_GIT_REPO_URL, AG_GIT_BRANCH,
	AG_TIMEOUT, AG_STATUS, AG_STATUS_MESSAGE, AG_SANDBOX_ID, AG_NEEDS_REDEPLOY,
	AG_CREATED_AT, AG_UPDATED_AT, AG_DEPLOYED_AT, AG_IMAGE_PATH, AG_ENTRYPOINT,
	AG_RUNNER_ID, AG_CODE_SHA256, AG_NCOLS
};

#define AH_AGENT_COLS                                                                 \
	"id, name, slug, description, source_type, git_repo_url, git_branch,"             \
	" timeout_seconds, status, status_message, sandbox_id, needs_redeploy,"           \
	" created_at, updated_at, deployed_at, image_path, entrypoint, runner_id, code_sha256"

/* Loads the caller's agent named by the first path parameter into *out (a row of
 * AH_AGENT_COLS). Answers 404 itself (also for another user's agent) → AH_EDONE. */
int ah_agent_load(ah_req *r, char ***out);

/* The contract's agent record. */
json_object *ah_agent_json(ah_req *r, char **row);

#endif
