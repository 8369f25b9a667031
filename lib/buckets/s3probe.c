/* s3 and r2: one ListObjectsV2 (max-keys=1, under the prefix) through lib/s3,
 * its handle under the same guard as every other connection of /test. */
#include "buckets/internal.h"
#include "s3/s3.h"

#include <string.h>

#define AWS_DEFAULT_REGION "us-east-1"

struct outcome {
	ah_bucket_guard guard;
	int curl_code;
	long status;
};

static void prepare(void *ud, void *curl)
{
	ah_bucket_guard_apply(&((struct outcome *)ud)->guard, curl);
}

static void done(void *ud, int curl_code, long status)
{
	struct outcome *o = ud;
	o->curl_code = curl_code;
	o->status = status;
}

static int stop_at_first(void *ud, const char *key, int64_t size)
{
	(void)ud, (void)key, (void)size;
	return 1;
}

/* Where requests go: the endpoint, else AWS's regional one. */
static const char *endpoint_of(ah_arena *a, const ah_bucket_target *t, const char *region)
{
	if (t->endpoint_url)
		return t->endpoint_url;
	return strcmp(region, AWS_DEFAULT_REGION) == 0 ? "https://s3.amazonaws.com"
	       : ah_sprintf(a, "https://s3.%s.amazonaws.com", region);
}

static const char *status_message(ah_arena *a, const ah_bucket_target *t, long status)
{
	if (status == 404)
		return ah_sprintf(a, "Bucket '%s' does not exist at this endpoint (check bucket_name, "
		                  "region and endpoint_url)", t->bucket_name);
	if (status == 401 || status == 403)
		return ah_sprintf(a, "The credentials were rejected (HTTP %ld): check access_key_id "
		                  "and secret_access_key, and that the key may list bucket '%s'",
		                  status, t->bucket_name);
	if (status == 301 || status == 400)
		return ah_sprintf(a, "The endpoint refused the request (HTTP %ld): the bucket may be in "
		                  "another region than '%s'", status,
		                  t->region ? t->region : AWS_DEFAULT_REGION);
	return ah_sprintf(a, "The endpoint answered HTTP %ld to a bucket listing", status);
}

int ah_bucket_probe_s3(ah_arena *a, const ah_bucket_target *t, bool *ok, const char **message)
{
	struct outcome o = {.guard = {.policy = t->policy}};
	ah_s3_hooks hooks = {prepare, done, &o};
	const char *region = t->region ? t->region
	                     : t->provider == AH_PROVIDER_R2 ? "auto" : AWS_DEFAULT_REGION;
	const char *endpoint = endpoint_of(a, t, region);
	ah_s3 s;
	ah_err err;
	*ok = false;
	if (ah_s3_init(&s, endpoint, t->bucket_name, region, t->creds->access_key_id,
	               t->creds->secret_access_key, &err) != 0) {
		*message = "endpoint_url should be scheme://host[:port] without a path, and the "
		           "bucket name and keys at most 63 and 127 characters";
		return 0;
	}
	s.hooks = &hooks;
	s.timeout_s = AH_BUCKET_TIMEOUT_S;
	int rc = ah_s3_list(&s, t->prefix ? t->prefix : "", 1, stop_at_first, NULL, &err);
	memset(&s, 0, sizeof(s));
	if (rc == 0 || rc == 1) {
		*ok = true;
		*message = ah_sprintf(a, "Listed bucket '%s' with the stored credentials", t->bucket_name);
	} else if (o.curl_code != 0) {
		*message = ah_bucket_curl_message(a, &o.guard, o.curl_code, endpoint);
	} else {
		*message = status_message(a, t, o.status);
	}
	return 0;
}
