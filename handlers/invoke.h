/* One call of POST /agents/{slug}/invoke as it passes from invoke.c (checks,
 * environment, session) to whichever way it is answered: plain JSON
 * (invoke.c), a stream of server-sent events (invoke_stream.c) or 202 and a
 * process of its own that records it (invoke_async.c). Every way runs and
 * records it through ah_call_run: one recording path. */
#ifndef AH_HANDLERS_INVOKE_H
#define AH_HANDLERS_INVOKE_H

#include "agents.h"
#include "budgets.h"
#include "invocations.h"
#include "invoke_answer.h"
#include "invoke_timing.h"
#include "runner_calls.h"

typedef struct ah_invoke_in {
	const char *prompt;
	size_t prompt_len;
	const char *session_id; /* the client's; NULL for an ephemeral sandbox */
	long long timeout_s;
	bool async, stream;
	const char *webhook_url; /* the call's own; NULL: the agent's default, if any */
} ah_invoke_in;

typedef struct ah_call {
	const ah_agent *a;
	ah_invoke_in in;
	ah_invocation inv;      /* id, created_at, session_id and prompt set before the run */
	json_object *env;
	int64_t start;          /* ah_now_ms() when the call was accepted */
	size_t in_tokens;
	ah_run_out o;
	ah_budget_hold budget;  /* the spend limits' hold, taken at admission (budgets.h) */
	ah_rows files;          /* what the run request's files are made of (invoke_files.h) */
	ah_inv_timing tm;       /* where the call's time goes (invoke_timing.h) */
	/* Streaming: each piece of the agent's stdout as the runner sends it. */
	ah_runner_chunk_fn on_chunk;
	void *chunk_ctx;
} ah_call;

/* Runs the call and records it (history, usage, logs): the one place every
 * finished invocation passes, whichever way it is answered. Nothing is
 * recorded when nothing ran (c->o.http 503). (invoke.c) */
void ah_call_run(ah_req *r, ah_call *c);

/* The plain answer of a finished call: 200 with the result, or the error
 * status with {"detail", "invocation"}. (invoke.c) */
int ah_call_reply(ah_req *r, const ah_call *c);

/* Makes the session sid of the agent exist and be active before its call
 * (state: what the call read of it, NULL when there is none): 0, AH_EDONE
 * (429 at the plan's cap, answered) or AH_EFAIL. (invoke_session.c) */
int ah_invoke_claim_session(ah_req *r, const char *agent_id, const char *sid, const char *state);

/* "async": true — 202 {invocation_id, status: "running"}; the call runs in a
 * process of its own, not in the worker. (invoke_async.c) */
int ah_invoke_async(ah_req *r, ah_call *c);

/* "stream": true or Accept: text/event-stream. (invoke_stream.c) */
int ah_invoke_stream(ah_req *r, ah_call *c);
bool ah_invoke_wants_stream(ah_req *r);

#endif
