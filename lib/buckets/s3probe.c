/* s3 and r2: one ListObjectsV2 (max-keys=1) through lib/s3. */
#include "buckets/internal.h"

int ah_bucket_probe_s3(ah_arena *a, const ah_bucket_target *t, bool *ok, const char **message)
{
	(void)a;
	(void)t;
	*ok = false;
	*message = "not yet";
	return 0;
}
