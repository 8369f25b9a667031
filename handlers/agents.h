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

/* Read from `agents a` (the alias lets the same list serve the key+agent query). */
#define AH_AGENT_COLS                                                                 \
	"a.id, a.name, a.slug, a.description, a.source_type, a.git_repo_url,"             \
	" a.git_branch, a.timeout_seconds, a.status, a.status_message, a.sandbox_id,"     \
	" a.needs_redeploy, a.created_at, a.updated_at, a.deployed_at, a.image_path,"     \
	" a.entrypoint, a.runner_id, a.code_sha256"

/* The authentication query of routes under /agents/{slug} (ah_route.scope_sql):
 * the key's columns, then AH_AGENT_COLS of the caller's agent named {slug}. */
extern const char ah_agent_scope_sql[];
#define AH_AGENT_SCOPE ah_agent_scope_sql

/* The caller's agent named by the first path parameter, as a row of
 * AH_AGENT_COLS: the one authentication loaded (AH_AGENT_SCOPE routes) or a fresh
 * query. Answers 404 itself (also for another user's agent) → AH_EDONE. */
int ah_agent_load(ah_req *r, char ***out);

/* The contract's agent record. */
json_object *ah_agent_json(ah_req *r, char **row);

#endif
