/* A runner's copies of the S3 blobs it places in sandboxes (attachments, a
 * session's earlier outputs), so that a call fetches each from the bucket
 * once, not on every call (issue 31). A blob is named by its SHA-256, so a
 * copy is never stale, and one is checked against its name before it is
 * kept. Bounded (AH_BLOB_CACHE_MAX_BYTES, the least recently used going
 * first) and short-lived: a copy unused for AH_BLOB_CACHE_IDLE_S goes, so a
 * file its owner deleted leaves this host within that. Under data_dir,
 * which is the runner's alone (0700). */
#ifndef AH_RUNNER_BLOB_CACHE_H
#define AH_RUNNER_BLOB_CACHE_H

#include <stddef.h>

#include "core/config.h"

#define AH_BLOB_CACHE_MAX_BYTES (1LL << 30)
#define AH_BLOB_CACHE_IDLE_S 600

/* The copy of sha into *buf (malloc'ed, *len bytes), marked used: 0, or
 * AH_ENOTFOUND when there is none (or it is over max bytes). */
int ah_blob_cache_read(const ah_config *cfg, const char *sha, char **buf, size_t *len, size_t max);

/* Keeps buf as sha's copy when its SHA-256 is sha (a blob that does not
 * match is not kept, and logged), then holds the cache to its bounds. */
void ah_blob_cache_keep(const ah_config *cfg, const char *sha, const char *buf, size_t len);

/* Removes copies unused for idle_s seconds and, oldest first, those past
 * max_bytes (the runner's minute sweep, and after each copy kept). */
void ah_blob_cache_sweep(const ah_config *cfg, long long idle_s, long long max_bytes);

#endif
