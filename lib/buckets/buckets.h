/* Customer buckets: which endpoints may be reached, what a credential must
 * look like, and the one real request /buckets/{slug}/test makes (s3 and r2
 * through lib/s3's SigV4, gcs through a service account's RS256 JWT). Shared
 * by the API (validation, /test) and the runner (rclone's configuration), so
 * both apply the same rules. No database: callers pass what they loaded. */
#ifndef AH_BUCKETS_BUCKETS_H
#define AH_BUCKETS_BUCKETS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/arena.h"
#include "core/err.h"
#include "core/netaddr.h"

/* The buckets.provider ENUM of schema/006_buckets.sql, in its order. */
typedef enum ah_provider { AH_PROVIDER_S3, AH_PROVIDER_GCS, AH_PROVIDER_R2 } ah_provider;
extern const char *const ah_provider_names[];

/* Opened credentials: s3/r2 fill the key pair, gcs the service-account
 * fields (sa_json is the whole key file, as the user sent it). */
typedef struct ah_bucket_creds {
	const char *access_key_id, *secret_access_key;
	const char *sa_json, *client_email, *private_key, *token_uri;
} ah_bucket_creds;

/* What a request to the bucket needs. creds NULL: never set. */
typedef struct ah_bucket_target {
	ah_provider provider;
	const char *bucket_name, *region, *endpoint_url, *prefix;
	const ah_bucket_creds *creds;
	ah_addr_policy policy;  /* storage_allow_private, storage_allow_hosts */
} ah_bucket_target;

/* An endpoint (or token_uri) a user may name: http:// or https:// only, a
 * host, no credentials, query or fragment; a literal address in any spelling
 * (see ah_addr_parse; a malformed one is refused), or "localhost", is
 * checked with the URL's port against pol: link-local or metadata always
 * refused, loopback, private or CGNAT unless pol opens it. Names are checked
 * again on the address each connection reaches (ah_bucket_probe, and a
 * mount's rclone: lib/runner/fuse_guard.c). Without path_ok nothing but "/"
 * may follow host:port. AH_EINVALID with a sentence for the 422. */
int ah_bucket_endpoint_check(const char *url, const ah_addr_policy *pol, bool path_ok,
                             ah_err *err);

/* The policy of every connection made to a customer's bucket, from
 * storage_allow_private and storage_allow_hosts. */
struct ah_config;
ah_addr_policy ah_bucket_policy(const struct ah_config *cfg);

/* ^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$ (S3's rules, and GCS's longer dotted names). */
bool ah_bucket_name_valid(const char *s);
/* ^[a-z0-9-]{1,64}$ */
bool ah_bucket_region_valid(const char *s);

/* A GCS service-account key file: a JSON object with string client_email,
 * private_key (PEM) and token_uri (an endpoint as above). Fills out's gcs
 * fields (from arena a); AH_EINVALID with a sentence otherwise. */
int ah_bucket_sa_parse(ah_arena *a, ah_bucket_creds *out, const char *json,
                       const ah_addr_policy *pol, ah_err *err);

/* The JSON API's base of a GCS bucket's endpoint_url (NULL: Google's), ending
 * in /storage/v1 without a slash: endpoint_url may be the host (as Google's
 * Python and Node clients take it) or name that path itself (as Go's do). */
const char *ah_bucket_gcs_api_base(ah_arena *a, const char *endpoint_url);

/* The sealed form of credentials (a JSON document) and back. */
char *ah_bucket_creds_encode(ah_arena *a, const ah_bucket_creds *c);
int ah_bucket_creds_decode(ah_arena *a, ah_bucket_creds *out, ah_provider p, const char *doc,
                           ah_err *err);

/* The real request of /test, at most 10 s. *ok and a message a person can act
 * on ("Bucket 'x' does not exist", "The credentials were rejected: …",
 * "Could not connect to …", "TLS handshake with … failed", "timed out");
 * returns 0 unless something local failed. */
int ah_bucket_probe(ah_arena *a, const ah_bucket_target *t, bool *ok, const char **message);

#endif
