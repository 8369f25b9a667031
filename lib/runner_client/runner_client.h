/* The API workers' side of the runner protocol (docs/runner-protocol.md): one
 * JSON request per connection to the runner that holds the request's agent
 * (agents.runner_id → runners.address: a unix socket path, or host:port over
 * TCP after the shared-secret handshake, then sealed: rpc/rpc.h).
 * Requests without an agent_id, and agents no runner holds yet, go to
 * runner_socket. */
#ifndef AH_RUNNER_CLIENT_H
#define AH_RUNNER_CLIENT_H

#include <json-c/json.h>
#include <stdbool.h>

#include "core/arena.h"
#include "core/config.h"
#include "db/db.h"
#include "rpc/rpc.h"

/* What a call needs of its caller, and all it sees of it (no HTTP request):
 * the arena that owns the answer, the configuration, a database connection
 * to look up the agent's runner (NULL: runner_socket), and the request id
 * the runner's log lines carry (NULL: none). The API's handlers make one per
 * request (handlers/runner_calls.c). */
typedef struct ah_rc {
	ah_arena *arena;
	const ah_config *cfg;
	ah_db *db;
	const char *request_id;
} ah_rc;

/* Sends req (not consumed) and parses the answer into *resp (owned by the
 * request's arena). AH_ETIMEOUT when no answer came within timeout_ms;
 * AH_EBUSY when the runner could not be reached, so the request was never
 * sent; AH_EFAIL when the connection broke after it was, or the runner
 * answered garbage. */
int ah_rc_call(const ah_rc *r, json_object *req, json_object **resp, int timeout_ms);

/* A piece of a streamed run's stdout (issue 28), in order; data NULL and len
 * 0 about once a second while nothing comes (the caller's clock). */
typedef void (*ah_runner_chunk_fn)(void *ctx, const char *data, size_t len);

/* ah_rc_call for a run whose request asks for "stream": fn gets the
 * chunks the runner sends before its answer (stream.h). fn NULL: a plain call. */
int ah_rc_call_stream(const ah_rc *r, json_object *req, json_object **resp, int timeout_ms,
                      ah_runner_chunk_fn fn, void *ctx);

/* Destroys every sandbox of the agent (redeploy, stop). 0 on success. */
int ah_rc_destroy_agent(const ah_rc *r, const char *agent_id);
/* The same on the named runner (NULL: the agent's, looked up), and with purge
 * also the agent's images: for an agent whose row is already deleted. */
int ah_rc_forget_agent(const ah_rc *r, const char *agent_id, const char *runner_id, bool purge);
/* The same, and the runner retires left_image's directory (a rollback left
 * that image: it stays in the file store while its deploy keeps it). */
int ah_rc_left_image(const ah_rc *r, const char *agent_id, const char *runner_id, bool purge,
                     const char *left_image);

/* The agent's warm processes (issue 15) were started with settings that
 * changed (a secret, min_warm): the runner drops them now. Only hygiene: a
 * call never takes a warm process whose program, image and environment are
 * not the call's own (the runner compares them), so a failure is logged and
 * otherwise ignored. */
int ah_rc_retire_warm(const ah_rc *r, const char *agent_id, const char *runner_id);

#endif
