/* Calls in progress (issue 28): invocations_running and its owner's lock
 * (schema/024). invoke_async.c makes and ends the rows; invocation.c reads
 * them (GET, cancel) and records the calls whose owner is gone. */
#ifndef AH_HANDLERS_RUNNING_H
#define AH_HANDLERS_RUNNING_H

#include "invoke.h"

/* The lock's name is this followed by the invocation id. */
#define AH_RUNNING_LOCK "agenthost_inv_"

/* The row alone (an asynchronous call: its owner locks). */
int ah_running_add(ah_req *r, const ah_call *c);
/* The row and the lock on r->db (a streamed call, held by its worker). */
int ah_running_begin(ah_req *r, const ah_call *c);
/* After the call is recorded: the row gone, the lock released. */
void ah_running_end(ah_req *r, const ah_call *c);

#endif
