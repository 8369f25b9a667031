/* The presigner against AWS's documented SigV4 query-string example
 * ("Authenticating Requests: Using Query Parameters", GET test.txt from
 * examplebucket, 2013-05-24, 86400 s), and path-style URLs as we use them. */
#include <string.h>

#include "s3/s3.h"
#include "tap.h"

#define AWS_AK "AKIAIOSFODNN7EXAMPLE"
#define AWS_SK "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define T20130524 ((time_t)1369353600)

int main(void)
{
	ah_s3 s;
	ah_err err;
	char url[AH_S3_URL_MAX];
	/* Virtual-hosted (empty bucket): exactly AWS's example. */
	ok(ah_s3_init(&s, "https://examplebucket.s3.amazonaws.com", "", "us-east-1", AWS_AK,
	              AWS_SK, &err) == 0, "init with AWS's example settings");
	ok(ah_s3_presign(url, sizeof(url), &s, "GET", "test.txt", 86400, T20130524, &err) == 0,
	   "presign GET test.txt");
	ok(strcmp(url, "https://examplebucket.s3.amazonaws.com/test.txt"
	               "?X-Amz-Algorithm=AWS4-HMAC-SHA256"
	               "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
	               "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
	               "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404") == 0,
	   "the URL and signature of AWS's example: %s", url);
	/* Path style: the bucket is the first path segment, the key is encoded. */
	ok(ah_s3_init(&s, "http://127.0.0.1:4569/", "bkt", "us-east-1", "K", "S", &err) == 0,
	   "init path-style, trailing slash dropped");
	ok(ah_s3_presign(url, sizeof(url), &s, "PUT", "a b/c+d.txt", 60, T20130524, &err) == 0 &&
	   strncmp(url, "http://127.0.0.1:4569/bkt/a%20b/c%2Bd.txt?X-Amz-Algorithm=", 58) == 0,
	   "path-style key encoded, slash kept: %s", url);
	ok(ah_s3_presign(url, sizeof(url), &s, "PUT", "k", 604801, T20130524, &err) == AH_EINVALID,
	   "expiry over 7 days refused");
	ok(ah_s3_init(&s, "ftp://x", "b", "r", "K", "S", &err) == AH_EINVALID,
	   "non-http endpoint refused");
	ok(ah_s3_init(&s, "http://h/p", "b", "r", "K", "S", &err) == AH_EINVALID,
	   "endpoint with a path refused");
	return tap_done();
}
