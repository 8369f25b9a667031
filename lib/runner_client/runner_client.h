/* The API workers' side of the runner protocol (docs/runner-protocol.md): one
 * JSON request per connection to the runner that holds the request's agent
 * (agents.runner_id → runners.address: a unix socket path, or host:port over
 * TCP after the shared-secret handshake of auth.h, then sealed: wire.h).
 * Requests without an agent_id, and agents no runner holds yet, go to
 * runner_socket. */
#ifndef AH_RUNNER_CLIENT_H
#define AH_RUNNER_CLIENT_H

#include <json-c/json.h>
#include <stdbool.h>

#include "http/http.h"

/* Sends req (not consumed) and parses the answer into *resp (owned by the
 * request's arena). AH_ETIMEOUT when no answer came within timeout_ms;
 * AH_EBUSY when the runner could not be reached, so the request was never
 * sent; AH_EFAIL when the connection broke after it was, or the runner
 * answered garbage. */
int ah_runner_call(ah_req *r, json_object *req, json_object **resp, int timeout_ms);

/* A piece of a streamed run's stdout (issue 28), in order; data NULL and len
 * 0 about once a second while nothing comes (the caller's clock). */
typedef void (*ah_runner_chunk_fn)(void *ctx, const char *data, size_t len);

/* ah_runner_call for a run whose request asks for "stream": fn gets the
 * chunks the runner sends before its answer (stream.h). fn NULL: a plain call. */
int ah_runner_call_stream(ah_req *r, json_object *req, json_object **resp, int timeout_ms,
                          ah_runner_chunk_fn fn, void *ctx);

/* This host's runner id (see local.c): what the runner on runner_socket
 * registers as, and how a worker knows an agent's runner is that one.
 * -1 when runner_socket's directory does not exist (yet): the id is then
 * computed from the path as configured and may not be the runner's. */
int ah_runner_local_id(const ah_config *cfg, char *out, size_t n);

/* The runner an invocation of the agent goes to: runner_id, or when that
 * runner is gone (no heartbeat for three periods) and the agent is movable
 * (its image is in the file store), a live runner that now holds it
 * (takeover.c). Returns runner_id itself when nothing moved. */
const char *ah_runner_takeover(ah_req *r, const char *agent_id, const char *runner_id,
                               bool movable);

/* Destroys every sandbox of the agent (redeploy, stop). 0 on success. */
int ah_runner_destroy_agent(ah_req *r, const char *agent_id);
/* The same on the named runner (NULL: the agent's, looked up), and with purge
 * also the agent's images: for an agent whose row is already deleted. */
int ah_runner_forget_agent(ah_req *r, const char *agent_id, const char *runner_id, bool purge);
/* The same, and the runner retires left_image's directory (a rollback left
 * that image: it stays in the file store while its deploy keeps it). */
int ah_runner_left_image(ah_req *r, const char *agent_id, const char *runner_id, bool purge,
                         const char *left_image);

/* The agent's warm processes (issue 15) were started with settings that
 * changed (a secret, min_warm): the runner drops them now. Only hygiene: a
 * call never takes a warm process whose program, image and environment are
 * not the call's own (the runner compares them), so a failure is logged and
 * otherwise ignored. */
int ah_runner_retire_warm(ah_req *r, const char *agent_id, const char *runner_id);

#endif
