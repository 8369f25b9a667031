/* Shared by the files of lib/buckets; not part of its interface. */
#ifndef AH_BUCKETS_INTERNAL_H
#define AH_BUCKETS_INTERNAL_H

#include <curl/curl.h>
#include <stdint.h>

#include "buckets/buckets.h"

#define AH_BUCKET_TIMEOUT_S 10

/* The address policy of one request; refused: 1 private, 2 forbidden. */
typedef struct ah_bucket_guard {
	ah_addr_policy policy;
	int refused;
	int64_t deadline_ms;  /* ah_now_ms() by which all of /test's requests end; 0: 10 s each */
} ah_bucket_guard;

/* The first 16 KiB of an answer. */
typedef struct ah_bucket_body {
	char buf[16384];
	size_t len;
} ah_bucket_body;

/* Address check, timeouts, no redirects, http(s) only: on every handle. */
void ah_bucket_guard_apply(ah_bucket_guard *g, CURL *c);
/* A failed transfer (a CURLcode) as a sentence naming url's host. */
const char *ah_bucket_curl_message(ah_arena *a, const ah_bucket_guard *g, int code,
                                   const char *url);
/* GET (or POST of a form when post is set) under the guard. A transfer that
 * failed: *message says why and *status is 0. */
int ah_bucket_http(ah_arena *a, const ah_bucket_guard *guard, const char *url,
                   const char *post, const char *auth_header, long *status,
                   ah_bucket_body *body, const char **message);

int ah_bucket_probe_gcs(ah_arena *a, const ah_bucket_target *t, bool *ok, const char **message);
int ah_bucket_probe_s3(ah_arena *a, const ah_bucket_target *t, bool *ok, const char **message);

#endif
