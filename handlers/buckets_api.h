/* The bucket record, shared by /buckets and /agents/{slug}/mounts. */
#ifndef AH_HANDLERS_BUCKETS_API_H
#define AH_HANDLERS_BUCKETS_API_H

#include <stdbool.h>

#include "buckets/buckets.h"
#include "http/http.h"

typedef struct ah_bucket {
	const char *id, *name, *slug;
	ah_provider provider;
	const char *bucket_name, *region, *endpoint_url;
	bool has_credentials;
	const char *created_at, *updated_at;
} ah_bucket;

/* The caller's bucket with this slug; AH_ENOTFOUND (nothing written) when the
 * caller has none, also when another user has one. */
int ah_bucket_find(ah_req *r, const char *slug, const ah_bucket **out);

/* The bucket the path's first parameter names, or a 404 written (AH_EDONE). */
int ah_bucket_load(ah_req *r, const ah_bucket **out);

/* Sets needs_redeploy on every agent with a mount of the bucket. */
int ah_bucket_flag_agents(ah_req *r, const char *bucket_id);

/* The credentials of a provider in body o (bucket_access.c): required for
 * /credentials, optional at creation (*any: some were given). 422 entries
 * are left pending for the caller's ah_verr_reply; AH_EINVALID then. */
int ah_bucket_creds_fields(ah_req *r, json_object *o, ah_provider p, bool required,
                           ah_bucket_creds *c, bool *any);
/* Seals c into the bucket's row (inside the caller's transaction). */
int ah_bucket_creds_store(ah_req *r, const char *bucket_id, const ah_bucket_creds *c);

#endif
