/* A runner's copies of the S3 blobs it places in sandboxes (attachments, a
 * session's earlier outputs), so that a call fetches each from the bucket
 * once, not on every call (issue 31). A blob is named by its SHA-256, so a
 * copy is never stale, and one is checked against its name before it is
 * kept. Bounded (blob_cache_mb, the least recently used going first; 0 keeps
 * none) and short-lived: a copy unused for blob_cache_idle_seconds goes, so a
 * file its owner deleted leaves this host within that. Under data_dir,
 * which is the runner's alone (0700). */
#ifndef AH_RUNNER_BLOB_CACHE_H
#define AH_RUNNER_BLOB_CACHE_H

#include "core/config.h"

/* The copy of sha, open for reading in *fd and marked used: 0, or
 * AH_ENOTFOUND when there is none (or the cache is configured off). */
int ah_blob_cache_open(const ah_config *cfg, const char *sha, int *fd);

/* Keeps fd's bytes (read from offset 0; its position is left alone) as sha's
 * copy when their SHA-256 is sha (bytes that do not match are not kept, and
 * logged) and the cache is on, then holds the cache to its bounds. Copied
 * in pieces: a blob is never held in memory whole. */
void ah_blob_cache_keep(const ah_config *cfg, const char *sha, int fd);

/* Removes copies unused for idle_s seconds and, oldest first, those past
 * max_bytes. */
void ah_blob_cache_sweep(const ah_config *cfg, long long idle_s, long long max_bytes);

/* ah_blob_cache_sweep to the configured bounds (the runner's minute sweep,
 * and after each copy kept): a cache configured off is emptied. */
void ah_blob_cache_tidy(const ah_config *cfg);

#endif
