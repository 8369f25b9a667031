/* The agent record, shared by every resource nested under /agents/{slug}:
 * parsed once from its row (handlers/agent.c) into ah_agent, so no handler
 * reads a row by position. */
#ifndef AH_HANDLERS_AGENTS_H
#define AH_HANDLERS_AGENTS_H

#include <stdbool.h>

#include "http/http.h"
#include "http/router.h"

/* timeout_seconds of an agent that does not say (create, and a call that does
 * not pass its own): the one place the number is written. */
#define AH_AGENT_TIMEOUT_DEFAULT 120

/* The most min_warm the caller may set: the plan's cap (core/plans.h; an
 * unknown plan gets the free one's) and warm_max, whichever is lower. */
long long ah_agent_warm_cap(ah_req *r);

/* The agents.status ENUM of schema/001_core.sql, in its order. */
typedef enum ah_agent_status {
	AH_AGENT_DRAFT, AH_AGENT_DEPLOYING, AH_AGENT_ACTIVE, AH_AGENT_ERROR, AH_AGENT_STOPPED
} ah_agent_status;

/* The agents.source_type ENUM. */
typedef enum ah_source_type { AH_SOURCE_GIT, AH_SOURCE_LOCAL } ah_source_type;

extern const char *const ah_agent_status_names[];
extern const char *const ah_source_type_names[];

typedef struct ah_agent {
	const char *id, *name, *slug, *description, *git_repo_url, *git_branch;
	ah_source_type source_type;
	long long timeout_seconds;
	long long min_warm;         /* warm processes the runner keeps (issue 15) */
	ah_agent_status status;
	const char *status_message, *sandbox_id;
	bool needs_redeploy;
	const char *created_at, *updated_at, *deployed_at; /* DB DATETIME(3) text; NULL: never */
	const char *image_path, *entrypoint, *runner_id, *code_sha256; /* NULL until deployed/uploaded */
	const char *image_sha256;     /* the image in the file store (runner images.c), or NULL */
	const char *max_day, *max_month; /* budgets (budgets.h): decimal text, NULL: none */
	const char *network;          /* canonical JSON of an allow-list (agent_network.c); NULL: open */
	const char *webhook_url;      /* where its calls' records go by default (issue 28), or NULL */
} ah_agent;

/* The SELECT list of an agent, read from `agents a` (the alias lets the same
 * list serve the key+agent query). Must name the columns of agent.c's table,
 * in order (tests/unit/test_record.c checks). */
#define AH_AGENT_COLS                                                                 \
	"a.id, a.name, a.slug, a.description, a.source_type, a.git_repo_url,"             \
	" a.git_branch, a.timeout_seconds, a.status, a.status_message, a.sandbox_id,"     \
	" a.needs_redeploy, a.created_at, a.updated_at, a.deployed_at, a.image_path,"     \
	" a.entrypoint, a.runner_id, a.code_sha256, a.min_warm, a.image_sha256,"            \
	" a.max_cost_usd_per_day, a.max_cost_usd_per_month, a.network, a.webhook_url"

/* The scope of routes under /agents/{slug} (ah_route.scope): the key's
 * columns, then AH_AGENT_COLS of the caller's agent named {slug}, filled into
 * an ah_agent by authentication. */
extern const ah_scope ah_agent_scope;
#define AH_AGENT_SCOPE (&ah_agent_scope)

/* AH_AGENT_SCOPE plus the agent's history count and change counter
 * (list_counts n and changes, schema/019) in r->scope_extra[0] and [1],
 * NULL while the agent has never had an invocation. */
extern const ah_scope ah_agent_history_scope;

/* AH_AGENT_SCOPE plus what POST /agents/{slug}/invoke reads besides the agent
 * (r->scope_extra): the user's budgets (day, month), the key's, the time of
 * its runner's last heartbeat (DATETIME(3) text; NULL: no runner row), and
 * for an ephemeral call's environment the user's quota left, how many
 * attachments and secrets the agent has and the secrets themselves (a JSON
 * array of [name, hex of nonce and ciphertext]; NULL without any). */
enum { AH_INV_X_USER_DAY, AH_INV_X_USER_MONTH, AH_INV_X_KEY_DAY, AH_INV_X_KEY_MONTH,
       AH_INV_X_RUNNER_BEAT, AH_INV_X_QUOTA_LEFT, AH_INV_X_ATTACH_N, AH_INV_X_SECRETS_N,
       AH_INV_X_SECRETS, AH_AGENT_INVOKE_NEXTRA };
extern const ah_scope ah_agent_invoke_scope;

/* The caller's agent named by the first path parameter: the one
 * authentication loaded (AH_AGENT_SCOPE routes) or a fresh query. Answers
 * 404 itself (also for another user's agent) → AH_EDONE. */
int ah_agent_load(ah_req *r, const ah_agent **out);

/* The agent with this id (just written by the caller), read back. */
int ah_agent_by_id(ah_req *r, const char *id, const ah_agent **out);

/* Parses row i of an AH_AGENT_COLS query (lists). */
const ah_agent *ah_agent_from_rows(ah_req *r, const ah_rows *rows, size_t i);

/* The contract's agent record. */
json_object *ah_agent_json(ah_req *r, const ah_agent *a);

/* body.network (issue 32): *present when the key is there; *out the
 * canonical JSON to store, NULL for mode "open" (or after a 422 entry). */
void ah_agent_network_field(ah_req *r, json_object *o, const char **out, bool *present);
/* The record's `network` object from the stored text (new object). */
json_object *ah_agent_network_json(const char *stored);

/* The column table behind AH_AGENT_COLS (for the unit test). */
struct ah_col;
const struct ah_col *ah_agent_columns(size_t *n);

#endif
