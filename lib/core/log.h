/* Log lines to stderr: time, level, pid, the current request id, message.
 * Never pass a secret value to these. */
#ifndef AH_CORE_LOG_H
#define AH_CORE_LOG_H

#include <stdbool.h>
#include <stddef.h>

#include "core/config.h"
#include "core/err.h"

/* The request id stamped on every line until cleared (NULL). Copied. */
void ah_log_set_request_id(const char *id);
void ah_log_set_program(const char *name);
/* log_format of the configuration: "text" (the default) or "json", one JSON
 * object a line: {"time","level","program","pid","request_id","msg"}.
 * AH_EINVALID for any other value. Forked workers inherit it. */
int ah_log_configure(const ah_config *cfg, ah_err *err);
void ah_log_set_json(bool on);

/* Holding (a single-threaded process's choice): INFO lines wait in a buffer
 * until the next WARN or ERROR line, ah_log_flush, a full buffer or a second,
 * and then go out together, in order, in one write. The API's workers hold
 * the line of each request they answer while more requests wait, and flush
 * before they wait for one (and when they crash or stop): a write less per
 * request under load. Off: flushes. */
void ah_log_hold(bool on);
/* Whether lines are held now. */
bool ah_log_holding(void);
/* Writes the held lines (write(2) only: callable from a signal handler). */
void ah_log_flush(void);

void ah_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ah_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ah_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Escapes text that someone else wrote (an agent's stderr) for a log line, so
 * that it cannot end the line, move or recolour a terminal, reorder what a
 * reader sees, or pass for an escape the service wrote: each byte of a
 * backslash, a C0 control, DEL, a C1 control, U+2028/U+2029, a bidirectional
 * control (U+200E/F, U+202A..E, U+2066..9) or anything that is not valid UTF-8
 * becomes \xNN. Writes as much of in[0..len) as fits into out (cap >= 16
 * bytes; NUL-terminated, its length in *out_len) and returns how many bytes of
 * in it took. */
size_t ah_log_escape(char *out, size_t *out_len, size_t cap, const char *in, size_t len);

#endif
