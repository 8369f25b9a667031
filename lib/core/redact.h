/* A stream filter that replaces given secret values with "[redacted]" and
 * keeps the last `keep` bytes of what comes out (an invocation's stderr).
 *
 * Bytes arrive in chunks of any size: a secret split across two writes is
 * still found, because the filter holds back the end of a chunk while it may
 * be the start of a secret, and decides once the next chunk (or the end)
 * comes. At the end, held-back bytes that are the start of a secret are
 * redacted too: a program killed in the middle of writing one never leaves a
 * part of it. The kept window is cut after redaction, and a cut that falls
 * inside a "[redacted]" marker or a UTF-8 character moves past it, so the
 * window never starts with a piece of a secret or of a character. */
#ifndef AH_CORE_REDACT_H
#define AH_CORE_REDACT_H

#include <stdbool.h>
#include <stddef.h>

#define AH_REDACT_MARK "[redacted]"

typedef struct ah_redact ah_redact;

/* Output: every byte that passed the filter. */
typedef void (*ah_redact_sink)(void *ctx, const char *b, size_t n);

/* A filter for the n values (empty ones are ignored; the values are copied
 * and wiped at free) keeping the last keep bytes (0: none); sink, when not
 * NULL, also sees everything that passes. NULL when out of memory. */
ah_redact *ah_redact_new(const char *const *values, size_t n, size_t keep, ah_redact_sink sink,
                         void *ctx);
/* Where what passes goes from now on. */
void ah_redact_set_sink(ah_redact *r, ah_redact_sink sink, void *ctx);
void ah_redact_write(ah_redact *r, const char *b, size_t n);
/* The end of the stream: what was held back is decided. */
void ah_redact_end(ah_redact *r);
/* The kept window (valid until free), its length, and whether anything
 * before it was dropped. Call after ah_redact_end. */
const char *ah_redact_kept(const ah_redact *r, size_t *len, bool *truncated);
void ah_redact_free(ah_redact *r);

#endif
