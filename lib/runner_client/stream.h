/* Streamed runs over the runner protocol (issue 28), private to
 * runner_client: before its answer the runner sends the agent's stdout as it
 * comes, as chunk messages {"chunk_b64":"…"} — lines on the unix socket,
 * sealed frames not marked final over TCP (frames, rpc/rpc.h). The answer is the one
 * message that is not a chunk (over TCP: the final frame). While nothing
 * comes, the handler is called with no bytes about once a second (its
 * clock: the stream's keep-alive comments). */
#ifndef AH_RUNNER_CLIENT_STREAM_H
#define AH_RUNNER_CLIENT_STREAM_H

#include "runner_client/runner_client.h"
#include "rpc/rpc.h"

#define AH_RC_MAX_ANSWER (64 * 1024 * 1024) /* base64 of a 10 MB output plus slack */

/* The answer line after the chunks, into the arena. */
int ah_rc_stream_unix(const ah_rc *r, int fd, int timeout_ms, ah_runner_chunk_fn fn, void *ctx,
                      char **out, size_t *outlen);
/* The final frame after the chunks (malloc'ed, NUL-terminated, as
 * ah_rwire_recv gives it). */
int ah_rc_stream_tcp(ah_rwire *w, int timeout_ms, ah_runner_chunk_fn fn, void *ctx,
                     unsigned char **ans, size_t *alen, ah_err *err);

#endif
