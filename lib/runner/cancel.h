/* Issue 28: the runs in progress by invocation id, so that the "cancel" op
 * reaches the one it names (SIGTERM, SIGKILL after the grace period:
 * ah_sandbox_exec_spec.cancel), and the chunks of a streamed run go back on
 * its own connection (server.c sets the connection's sink). */
#ifndef AH_RUNNER_CANCEL_H
#define AH_RUNNER_CANCEL_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct ah_run_slot {
	char id[48];
	volatile int flag;          /* set by a cancel; the exec's spec points at it */
	struct ah_run_slot *next;
} ah_run_slot;

/* While the run of id executes. A cancel that came a moment before (the
 * call's process asked while the run was being set up) applies at once. */
void ah_run_slot_add(ah_run_slot *s, const char *id);
void ah_run_slot_remove(ah_run_slot *s);

/* {"op":"cancel","invocation_id":…} → {"ok":true,"found":bool}. */
json_object *ah_op_cancel(json_object *req);

/* The connection's chunk writer for a streamed run, set by server.c for its
 * thread; ah_run_chunk is an on_stdout callback (ctx unused). */
typedef void (*ah_chunk_writer)(void *conn, const char *msg, size_t len);
void ah_run_chunk_sink(ah_chunk_writer fn, void *conn);
void ah_run_chunk(void *ctx, const char *data, size_t len);

#endif
