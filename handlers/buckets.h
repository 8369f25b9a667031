/* The bucket record, shared by /buckets and /agents/{slug}/mounts. */
#ifndef AH_HANDLERS_BUCKETS_H
#define AH_HANDLERS_BUCKETS_H

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

/* Sets needs_redeploy on every agent with a mount of the bucket. */
int ah_bucket_flag_agents(ah_req *r, const char *bucket_id);

#endif
