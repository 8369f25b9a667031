/* The registry entries' state machine (sandboxes_int.h): one table of the
 * allowed changes, in the manner of h2o's h2o_http2_stream_set_state, so a
 * change the code does not expect is caught where it happens rather than
 * seen later as an entry two things think they own. */
#include "runner/sandboxes_int.h"

#define BIT(s) (1u << (s))

/* For each state, the states it may come from. */
static const unsigned from_states[AH_SBX_NSTATES] = {
	[AH_SBX_NEW] = 0,
	[AH_SBX_EPHEMERAL] = BIT(AH_SBX_NEW) | BIT(AH_SBX_SPARE) | BIT(AH_SBX_WARM) |
	                     BIT(AH_SBX_WARM_READY),
	[AH_SBX_SPARE] = BIT(AH_SBX_NEW),
	[AH_SBX_WARM] = BIT(AH_SBX_NEW),
	[AH_SBX_WARM_READY] = BIT(AH_SBX_WARM),
	[AH_SBX_WARM_DIED] = BIT(AH_SBX_WARM) | BIT(AH_SBX_WARM_READY),
	[AH_SBX_SESSION] = BIT(AH_SBX_NEW) | BIT(AH_SBX_HELD) | BIT(AH_SBX_HELD_READY),
	[AH_SBX_HELD] = BIT(AH_SBX_SESSION) | BIT(AH_SBX_HELD) | BIT(AH_SBX_HELD_READY),
	[AH_SBX_HELD_READY] = BIT(AH_SBX_HELD),
};

static const char *const names[AH_SBX_NSTATES] = {
	[AH_SBX_NEW] = "new",
	[AH_SBX_EPHEMERAL] = "ephemeral",
	[AH_SBX_SPARE] = "spare",
	[AH_SBX_WARM] = "warm",
	[AH_SBX_WARM_READY] = "warm-ready",
	[AH_SBX_WARM_DIED] = "warm-died",
	[AH_SBX_SESSION] = "session",
	[AH_SBX_HELD] = "held",
	[AH_SBX_HELD_READY] = "held-ready",
};

bool ah_sbx_state_allowed(enum ah_sbx_state from, enum ah_sbx_state to)
{
	if ((unsigned)from >= AH_SBX_NSTATES || (unsigned)to >= AH_SBX_NSTATES)
		return false;
	return (from_states[to] & BIT(from)) != 0;
}

const char *ah_sbx_state_name(enum ah_sbx_state s)
{
	return (unsigned)s < AH_SBX_NSTATES ? names[s] : "?";
}

int ah_sbx_set_state(struct ah_sbx_entry *e, enum ah_sbx_state to)
{
	if (!ah_sbx_state_allowed(e->state, to)) {
		ah_runner_violation("sandbox of agent=%s: state %s -> %s is not allowed", e->agent_id,
		                    ah_sbx_state_name(e->state), ah_sbx_state_name(to));
		return -1;
	}
	e->state = to;
	return 0;
}
