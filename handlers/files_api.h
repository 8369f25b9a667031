/* Shared by the files handlers (files.c, file_upload.c, agent_files.c): the
 * process's storage backend, the contract's file record and the answers every
 * one of them gives the same way. */
#ifndef AH_HANDLERS_FILES_API_H
#define AH_HANDLERS_FILES_API_H

#include "files/files.h"
#include "http/http.h"
#include "http/router.h"

/* Opens the storage backend once per worker (main.c's init_pool). */
int ah_files_init(const ah_config *cfg, ah_err *err);
const ah_store *ah_files_store(void);

/* The contract's file record. */
json_object *ah_file_json(ah_req *r, const ah_file *f);
/* The caller's file named id, or a 404 answered here (also for another
 * user's file: never reveal that it exists) → AH_EDONE. */
int ah_file_load(ah_req *r, const char *id, bool lock, ah_file *out);
/* Reads the file back and answers status with its record. */
int ah_file_reply(ah_req *r, int status, const char *id);
/* 403 with a detail saying how much is used of what (plan). */
int ah_files_quota_reply(ah_req *r, long long wanted);
/* 507: the host's disk is full (AH_ENOSPACE), logged as what (an upload). */
int ah_storage_full_reply(ah_req *r, const char *what);
/* Removes up to a few expired pending uploads (any user's): called on the
 * upload paths, so expired reservations and bytes never pile up. */
void ah_files_sweep(ah_req *r);

/* A presigned upload URL's query (expires, signature) signs a PUT of file id
 * with size bytes; *expires gets its expiry, which the caller checks
 * (file_presign.c; tests/fuzz/fuzz_presign.c). */
bool ah_upload_url_signed(ah_req *r, const char *id, long long size, long long *expires);

/* For helpers whose caller stops on non-zero: a response written is AH_EDONE. */
static inline int ah_answered(int rc)
{
	(void)rc;
	return AH_EDONE;
}

extern const ah_route ah_files_routes[];
extern const ah_route ah_file_upload_routes[];
extern const ah_route ah_file_presign_routes[];
extern const ah_route ah_agent_files_routes[];

#endif
