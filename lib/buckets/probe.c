/* /test's request, by provider. */
#include "buckets/internal.h"

int ah_bucket_probe(ah_arena *a, const ah_bucket_target *t, bool *ok, const char **message)
{
	*ok = false;
	if (!t->creds) {
		*message = "No credentials are set for this bucket";
		return 0;
	}
	if (t->endpoint_url) {
		ah_err err;
		bool path_ok = t->provider == AH_PROVIDER_GCS;
		if (ah_bucket_endpoint_check(t->endpoint_url, &t->policy, path_ok, &err) != 0) {
			*message = ah_sprintf(a, "endpoint_url is not allowed: %s", err.msg);
			return 0;
		}
	}
	return t->provider == AH_PROVIDER_GCS ? ah_bucket_probe_gcs(a, t, ok, message)
	                                      : ah_bucket_probe_s3(a, t, ok, message);
}
