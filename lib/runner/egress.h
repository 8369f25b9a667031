/* Each agent's egress allow-list as its last call carried it (issue 32).
 * The API sends the agent's `network` with every run; the sandboxes this
 * runner makes for the agent (calls, spares, warm processes) take their
 * rules from here when they are made. A call whose rules differ from the
 * recorded ones dooms every sandbox of the agent first, as a redeploy does
 * for sandboxes over an older image: no sandbox keeps old rules. */
#ifndef AH_RUNNER_EGRESS_H
#define AH_RUNNER_EGRESS_H

#include <stdbool.h>

#include "sandbox/sandbox.h"

/* Records eg (NULL: the open network) for the agent: 1 when it differs
 * from what was recorded (nothing recorded counts as open), 0 when not,
 * -1 when out of memory (the call must fail: nothing recorded reads open). */
int ah_egress_note(const char *agent_id, const ah_sandbox_egress *eg);
/* A copy of the agent's allow-list for a sandbox's spec in *out (free
 * it), NULL for the open network; -1 when out of memory. */
int ah_egress_of(const char *agent_id, ah_sandbox_egress **out);
/* spec->egress for a sandbox of the agent, read after its entry is
 * registered (sandboxes.c), so that a change of rules dooms it; free *eg. */
int ah_egress_spec(const char *agent_id, ah_sandbox_spec *spec, ah_sandbox_egress **eg, ah_err *err);
/* The agent is gone (its record is dropped). */
void ah_egress_forget(const char *agent_id);

#endif
