/* Managed file storage below the HTTP layer, shared by the API's handlers and
 * the runner (attachments, session outputs):
 *  - the backend (store.c): a local directory (files_dir) or an S3 bucket, both
 *    content-addressed by SHA-256, so identical uploads share one blob;
 *  - blobs and quota in MariaDB (blobs.c): a blob is refcounted by the file
 *    records that use it and removed with its last one; a user's bytes are
 *    reserved by one conditional UPDATE, so parallel uploads cannot pass quota;
 *  - the file record (record.c) and the checks on names, tags, content types
 *    and mount paths (names.c).
 *
 * Layout of files_dir (local backend; tmp/ also serves the S3 backend):
 *   blobs/ab/<sha256>   the bytes, root:<socket_group> 0640, served by nginx
 *   tmp/                uploads being received and hashed (same filesystem:
 *                       a finished upload is renamed into blobs/, not copied)
 *   pending/<file_id>   presigned uploads awaiting confirm
 *   incoming/           nginx's body files of presigned PUTs (renamed away) */
#ifndef AH_FILES_FILES_H
#define AH_FILES_FILES_H

#include <stdbool.h>
#include <stddef.h>

#include "core/arena.h"
#include "core/config.h"
#include "core/err.h"
#include "db/db.h"
#include "db/record.h"

#define AH_FILES_POST_MAX (10LL * 1024 * 1024)  /* POST /files; larger: presigned upload */
#define AH_FILENAME_MAX 255                      /* bytes */
#define AH_DESCRIPTION_MAX 2000                  /* characters */
#define AH_TAGS_MAX 20
#define AH_TAG_MAX 64                            /* characters */
#define AH_MOUNT_ROOT "/files/agent/"

/* ---- the backend (store.c) ---- */
typedef struct ah_store ah_store;

/* From storage_backend, files_dir, socket_group and s3_*; makes the local
 * directories. AH_EINVALID for an unknown backend or incomplete S3 settings. */
int ah_store_open(ah_store **out, const ah_config *cfg, ah_err *err);
void ah_store_close(ah_store *s);
bool ah_store_is_s3(const ah_store *s);
const char *ah_store_dir(const ah_store *s);

/* A new empty file under tmp/ (0600); *path from the arena. */
int ah_store_tmp(const ah_store *s, ah_arena *a, int *fd, char **path, ah_err *err);
/* A copy of src under tmp/, e.g. to hand to ah_blob_keep, which consumes it. */
int ah_store_tmp_copy(const ah_store *s, ah_arena *a, const char *src, char **path, ah_err *err);
/* Where a presigned upload's bytes wait for confirm (local backend). */
char *ah_store_pending_path(const ah_store *s, ah_arena *a, const char *file_id);
/* The object key of a pending upload (S3 backend). */
char *ah_store_pending_key(ah_arena *a, const char *file_id);

/* Makes the blob sha exist, taking its bytes from src (a file under tmp/ or
 * pending/, consumed: renamed, uploaded or removed). Call with the blob's row
 * locked (ah_blob_ref). */
int ah_store_put(const ah_store *s, const char *sha, const char *src, const char *content_type,
                 ah_err *err);
/* Removes the blob's bytes; a missing blob is no error. */
int ah_store_remove(const ah_store *s, const char *sha, ah_err *err);
/* Copies the blob's bytes to dest (created 0600). */
int ah_store_fetch(const ah_store *s, const char *sha, const char *dest, ah_err *err);
/* The blob's bytes, open for reading: local, the blob itself; S3, a copy
 * fetched into tmp/ and unlinked at once (the descriptor keeps it). */
int ah_store_open_blob(const ah_store *s, ah_arena *a, const char *sha, int *fd, ah_err *err);
/* How to serve a download: local: an X-Accel-Redirect URI (*redirect false);
 * S3: a presigned GET URL with the response's type and disposition (*redirect true). */
int ah_store_download(const ah_store *s, ah_arena *a, const char *sha, const char *content_type,
                      const char *disposition, char **out, bool *redirect, ah_err *err);
/* S3: a presigned PUT URL for a pending upload, valid expires_s. */
int ah_store_presign_put(const ah_store *s, ah_arena *a, const char *file_id, long expires_s,
                         char **url, ah_err *err);
/* S3: fetches a pending upload's object to a tmp/ file; AH_ENOTFOUND when absent. */
int ah_store_take_pending(const ah_store *s, ah_arena *a, const char *file_id, char **path,
                          ah_err *err);
/* Removes a pending upload's bytes, wherever they are. */
void ah_store_drop_pending(const ah_store *s, ah_arena *a, const char *file_id);

/* S3: calls fn with the file id of each pending/ object (non-zero stops). */
int ah_store_each_pending(const ah_store *s, int (*fn)(void *ud, const char *file_id), void *ud,
                          ah_err *err);

/* SHA-256 (hex) and size of a file. */
int ah_file_sha256(const char *path, char hex[65], long long *size, ah_err *err);

/* ---- blobs and quota (blobs.c); ah_blob_* run inside the caller's transaction ---- */
/* One more user of blob sha: creates its row (refcount 1) or raises it, with the
 * row locked, and places the bytes from src (see ah_store_put). */
int ah_blob_ref(ah_db *db, const ah_store *s, const char *sha, long long size, const char *src,
                const char *content_type, ah_err *err);
/* One user fewer; the last one removes the row and the bytes. */
int ah_blob_unref(ah_db *db, const ah_store *s, const char *sha, ah_err *err);
/* The same, each in its own transaction, for blobs kept by something other
 * than a file record (an agent's image, its uploaded code): one reference per
 * keeper, dropped when the keeper lets go, so a file of the same bytes and the
 * image never take each other's bytes away. ah_blob_drop of NULL or "" is a no-op. */
int ah_blob_keep(ah_db *db, const ah_store *s, const char *sha, long long size, const char *src,
                 const char *content_type, ah_err *err);
int ah_blob_drop(ah_db *db, const ah_store *s, const char *sha, ah_err *err);
/* Reserves bytes of the user's quota: AH_EDENIED when used + bytes > quota. */
int ah_quota_reserve(ah_db *db, const char *user_id, long long bytes);
/* Gives bytes back (never below 0). */
int ah_quota_release(ah_db *db, const char *user_id, long long bytes);

/* ---- the file record (record.c) ---- */
typedef enum { AH_SCOPE_USER, AH_SCOPE_AGENT, AH_SCOPE_SESSION } ah_file_scope;
typedef enum { AH_FILE_PENDING, AH_FILE_CONFIRMED } ah_file_status;
extern const char *const ah_file_scope_names[];
extern const char *const ah_file_status_names[];

typedef struct ah_file {
	const char *id, *user_id, *filename;
	long long size;
	const char *content_type;
	ah_file_scope scope;
	ah_file_status status;
	const char *description, *tags; /* tags: ",a,,b," */
	const char *sha256, *agent_id, *agent_slug, *session_id, *upload_expires_at;
	bool uploaded;
	const char *created_at, *updated_at;
} ah_file;

/* The SELECT list of a file, from `files f LEFT JOIN agents a ON a.id = f.agent_id`. */
#define AH_FILE_COLS                                                                   \
	"f.id, f.user_id, f.filename, f.size_bytes, f.content_type, f.scope, f.status,"   \
	" f.description, f.tags, f.sha256, f.agent_id, a.slug, f.session_id,"             \
	" f.upload_expires_at, f.uploaded, f.created_at, f.updated_at"
#define AH_FILE_FROM " FROM files f LEFT JOIN agents a ON a.id = f.agent_id"

void ah_file_fill(ah_file *f, char *const *row);
const ah_col *ah_file_columns(size_t *n);
/* The user's file by id (FOR UPDATE when lock): AH_ENOTFOUND also for another user's. */
int ah_file_get(ah_db *db, ah_arena *a, const char *user_id, const char *id, bool lock,
                ah_file *out);
/* Deletes the record, its attachments, its blob reference (or pending bytes)
 * and gives its bytes back to the quota, in one transaction. */
int ah_file_delete(ah_db *db, const ah_store *s, ah_arena *a, const ah_file *f, ah_err *err);
/* Deletes every file of an agent (agent and session scope), e.g. with the agent. */
int ah_files_delete_for_agent(ah_db *db, const ah_store *s, ah_arena *a, const char *agent_id,
                              ah_err *err);
/* Deletes every file of a user (all scopes), e.g. before the user's row;
 * *deleted counts them. */
int ah_files_delete_for_user(ah_db *db, const ah_store *s, ah_arena *a, const char *user_id,
                             int *deleted, ah_err *err);
/* Deletes up to max pending uploads past their expiry, with their bytes; on
 * S3, at most once a minute per process, also pending/ objects whose upload
 * is no longer pending (a presigned PUT replayed after confirm). */
int ah_files_sweep_expired(ah_db *db, const ah_store *s, ah_arena *a, int max, ah_err *err);

/* ---- history blobs (history.c): prompts and responses over AH_HISTORY_INLINE_MAX ---- */
#define AH_HISTORY_INLINE_MAX (64 * 1024)
/* Stores bytes as a blob referenced by the invocation (history_blobs), in its
 * own transaction, before the invocation's row is written; sha gets its hash. */
int ah_history_blob_put(ah_db *db, const ah_store *s, ah_arena *a, const char *invocation_id,
                        const char *agent_id, const void *bytes, size_t len, char sha[65],
                        ah_err *err);
/* The blob's bytes (NUL-terminated) from the arena, or NULL with err set. */
char *ah_history_blob_get(const ah_store *s, ah_arena *a, const char *sha, size_t *len, ah_err *err);
/* Releases the references whose invocation is gone (of one agent, or of all
 * with agent_id NULL), removing blobs nothing else uses: batches of batch
 * references, each its own transaction per reference, until one comes back
 * short or max_batches ran (INT_MAX: all of them). *released counts them. */
int ah_history_blobs_sweep(ah_db *db, const ah_store *s, ah_arena *a, const char *agent_id, int batch,
                           int max_batches, int *released, ah_err *err);

/* ---- names (names.c): NULL when acceptable, else why not ---- */
const char *ah_filename_problem(const char *name, size_t len);
const char *ah_content_type_problem(const char *ct);
/* Comma-separated tags → ",a,,b," (trimmed, sorted, deduplicated, each in
 * commas); NULL or "" → "". */
const char *ah_tags_parse(ah_arena *a, const char *csv, char **out);
/* Calls fn for each tag of a stored ",a,,b,". */
void ah_tags_each(const char *norm, void (*fn)(void *ud, const char *tag, size_t n), void *ud);
/* A Content-Disposition value for filename (RFC 6266 with an RFC 5987
 * filename* for names that are not plain ASCII). */
char *ah_content_disposition(ah_arena *a, const char *filename);
/* Checks and normalises an attachment's mount path (under /files/agent/). */
const char *ah_mount_path_problem(ah_arena *a, const char *path, char **normalised);

#endif
