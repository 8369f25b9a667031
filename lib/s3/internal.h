/* Helpers shared by presign.c and s3.c; not part of the module's interface. */
#ifndef AH_S3_INTERNAL_H
#define AH_S3_INTERNAL_H

#include <stddef.h>

#include "s3/s3.h"

/* The endpoint without its scheme ("host[:port]"), or NULL for another scheme. */
const char *ah_s3_host(const ah_s3 *s);
/* SigV4 URI encoding; -1 when out is too small. */
int ah_s3_uri_encode(char *out, size_t cap, const char *in, int keep_slash);
/* "/bucket/encoded-key" (or "/encoded-key" without a bucket); -1 when too long. */
int ah_s3_path(char *out, size_t cap, const ah_s3 *s, const char *key);

#endif
