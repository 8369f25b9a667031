/* A small S3 client: the handful of object calls managed file storage needs
 * (put from a file, get into a file, head, delete, list) signed by libcurl's
 * CURLOPT_AWS_SIGV4, and SigV4 query presigning (computed here with libsodium's
 * SHA-256 and HMAC) for URLs a client uses without credentials.
 *
 * URLs are path-style (endpoint/bucket/key), which every S3-compatible store
 * accepts; with an empty bucket the endpoint itself names the bucket
 * (virtual-hosted style, as in AWS's documented examples). */
#ifndef AH_S3_S3_H
#define AH_S3_S3_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "core/err.h"

/* Optional, for a caller that needs more than the calls give (the bucket test
 * of lib/buckets): prepare runs on each libcurl handle (a CURL *) before its
 * transfer, e.g. to check the address connected to; done after it, with the
 * CURLcode and the HTTP status (0 when no answer came). */
typedef struct ah_s3_hooks {
	void (*prepare)(void *ud, void *curl);
	void (*done)(void *ud, int curl_code, long http_status);
	void *ud;
} ah_s3_hooks;

typedef struct ah_s3 {
	char endpoint[256];   /* "http://127.0.0.1:4569" or "https://s3.eu-west-1.amazonaws.com" */
	char bucket[64];      /* "" when the endpoint is the bucket's own host */
	char region[64];      /* "us-east-1" */
	char access_key[128];
	char secret_key[128];
	long timeout_s;       /* whole-transfer cap; 0 = none (large objects) */
	const ah_s3_hooks *hooks; /* NULL (ah_s3_init's default): none */
} ah_s3;

/* The longest presigned URL that ah_s3_presign writes (with its NUL). */
#define AH_S3_URL_MAX 6144

/* Fills s, checking lengths and that endpoint is http(s)://host[:port] without a
 * path; AH_EINVALID otherwise. */
int ah_s3_init(ah_s3 *s, const char *endpoint, const char *bucket, const char *region,
               const char *access_key, const char *secret_key, ah_err *err);

/* Uploads the file at path as key, streamed from disk (never held in memory). */
int ah_s3_put_file(const ah_s3 *s, const char *key, const char *path,
                   const char *content_type, ah_err *err);
/* Downloads key into path (created 0600, truncated). AH_ENOTFOUND for a missing
 * key, and path is removed then. */
int ah_s3_get_file(const ah_s3 *s, const char *key, const char *path, ah_err *err);
/* Size of key; AH_ENOTFOUND when it does not exist. */
int ah_s3_head(const ah_s3 *s, const char *key, int64_t *size, ah_err *err);
/* Deletes key; deleting a missing key succeeds (as S3 answers it). */
int ah_s3_delete(const ah_s3 *s, const char *key, ah_err *err);

/* One key of a listing; return non-zero to stop early (that value is returned). */
typedef int (*ah_s3_list_fn)(void *ud, const char *key, int64_t size);
/* ListObjectsV2 of keys under prefix ("" for all), at most max_keys (1..1000)
 * per page, following continuation tokens until the end or until fn stops. */
int ah_s3_list(const ah_s3 *s, const char *prefix, int max_keys, ah_s3_list_fn fn,
               void *ud, ah_err *err);

/* A SigV4 presigned URL (query-string authentication, UNSIGNED-PAYLOAD, only
 * `host` signed) for method ("GET", "PUT", …) on key, valid expires_s seconds
 * (1..604800) from now. now is a parameter so that tests can use AWS's examples. */
int ah_s3_presign(char *out, size_t cap, const ah_s3 *s, const char *method,
                  const char *key, long expires_s, time_t now, ah_err *err);

/* As ah_s3_presign, with extra query parameters signed along: name, value,
 * name, value, …, NULL; names in byte order and lower case (e.g.
 * "response-content-disposition", "response-content-type" for a GET whose
 * answer should carry them); values raw (encoded here). */
int ah_s3_presign_q(char *out, size_t cap, const ah_s3 *s, const char *method,
                    const char *key, long expires_s, time_t now, const char *const *extra,
                    ah_err *err);

#endif
