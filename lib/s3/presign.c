/* SigV4 query-string presigning (AWS "Authenticating Requests: Using Query
 * Parameters"), plus the endpoint parsing shared with s3.c. */
#include "s3/s3.h"
#include "s3/internal.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

static int copy(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);
	if (n >= cap)
		return -1;
	memcpy(dst, src, n + 1);
	return 0;
}

int ah_s3_init(ah_s3 *s, const char *endpoint, const char *bucket, const char *region,
               const char *access_key, const char *secret_key, ah_err *err)
{
	memset(s, 0, sizeof(*s));
	if (!endpoint || !bucket || !region || !access_key || !secret_key)
		return ah_err_set(err, AH_EINVALID, "s3: endpoint, bucket, region and keys are required");
	if (copy(s->endpoint, sizeof(s->endpoint), endpoint) || copy(s->bucket, sizeof(s->bucket), bucket) ||
	    copy(s->region, sizeof(s->region), region) ||
	    copy(s->access_key, sizeof(s->access_key), access_key) ||
	    copy(s->secret_key, sizeof(s->secret_key), secret_key))
		return ah_err_set(err, AH_EINVALID, "s3: a setting is too long");
	size_t n = strlen(s->endpoint);
	while (n > 0 && s->endpoint[n - 1] == '/')
		s->endpoint[--n] = '\0';
	const char *host = ah_s3_host(s);
	if (!host || !*host || strchr(host, '/') || !*s->region)
		return ah_err_set(err, AH_EINVALID, "s3: endpoint must be http(s)://host[:port], region set");
	return 0;
}

const char *ah_s3_host(const ah_s3 *s)
{
	if (strncmp(s->endpoint, "https://", 8) == 0)
		return s->endpoint + 8;
	if (strncmp(s->endpoint, "http://", 7) == 0)
		return s->endpoint + 7;
	return NULL;
}

/* RFC 3986 encoding as SigV4 wants it: unreserved characters stay, '/' stays
 * when keep_slash (object keys), everything else is %XX in upper case. */
int ah_s3_uri_encode(char *out, size_t cap, const char *in, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		int plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		            (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.' ||
		            *p == '~' || (keep_slash && *p == '/');
		if (o + 4 > cap)
			return -1;
		if (plain) {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	if (o >= cap)
		return -1;
	out[o] = '\0';
	return 0;
}

int ah_s3_path(char *out, size_t cap, const ah_s3 *s, const char *key)
{
	char enc[1536];
	if (ah_s3_uri_encode(enc, sizeof(enc), key, 1))
		return -1;
	int n = *s->bucket ? snprintf(out, cap, "/%s/%s", s->bucket, enc)
	                   : snprintf(out, cap, "/%s", enc);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static void hex_of(char *out, const unsigned char *b, size_t n)
{
	sodium_bin2hex(out, n * 2 + 1, b, n);
}

static void hmac(unsigned char out[32], const unsigned char *key, size_t klen, const char *msg)
{
	crypto_auth_hmacsha256_state st;
	crypto_auth_hmacsha256_init(&st, key, klen);
	crypto_auth_hmacsha256_update(&st, (const unsigned char *)msg, strlen(msg));
	crypto_auth_hmacsha256_final(&st, out);
	sodium_memzero(&st, sizeof(st));
}

/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), "s3"), "aws4_request"). */
static void signing_key(unsigned char out[32], const ah_s3 *s, const char *date)
{
	char k0[sizeof(s->secret_key) + 4];
	int n = snprintf(k0, sizeof(k0), "AWS4%s", s->secret_key);
	unsigned char a[32], b[32];
	hmac(a, (const unsigned char *)k0, (size_t)n, date);
	hmac(b, a, 32, s->region);
	hmac(a, b, 32, "s3");
	hmac(out, a, 32, "aws4_request");
	sodium_memzero(k0, sizeof(k0));
	sodium_memzero(a, sizeof(a));
	sodium_memzero(b, sizeof(b));
}

/* Appends "&name=value" for each pair of extra (names sorted, all after
 * "X-Amz-SignedHeaders" in byte order, as lower-case names are). */
static int append_extra(char *query, size_t cap, const char *const *extra)
{
	size_t n = strlen(query);
	for (size_t i = 0; extra && extra[i] && extra[i + 1]; i += 2) {
		char v[1024];
		if (ah_s3_uri_encode(v, sizeof(v), extra[i + 1], 0))
			return -1;
		int k = snprintf(query + n, cap - n, "&%s=%s", extra[i], v);
		if (k < 0 || (size_t)k >= cap - n)
			return -1;
		n += (size_t)k;
	}
	return 0;
}

int ah_s3_presign(char *out, size_t cap, const ah_s3 *s, const char *method,
                  const char *key, long expires_s, time_t now, ah_err *err)
{
	return ah_s3_presign_q(out, cap, s, method, key, expires_s, now, NULL, err);
}

int ah_s3_presign_q(char *out, size_t cap, const ah_s3 *s, const char *method,
                    const char *key, long expires_s, time_t now, const char *const *extra,
                    ah_err *err)
{
	char path[1600], date[9], stamp[17], scope[160], cred[400], query[4096];
	char creq[8192], sts[512], hash_hex[65], sig_hex[65];
	unsigned char h[32], k[32];
	struct tm tm;
	if (expires_s < 1 || expires_s > 604800)
		return ah_err_set(err, AH_EINVALID, "s3: presign expiry must be 1..604800 s");
	if (ah_s3_path(path, sizeof(path), s, key))
		return ah_err_set(err, AH_EINVALID, "s3: key too long");
	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%Y%m%d", &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(scope, sizeof(scope), "%s/%s/s3/aws4_request", date, s->region);
	char raw_cred[400];
	snprintf(raw_cred, sizeof(raw_cred), "%s/%s", s->access_key, scope);
	if (ah_s3_uri_encode(cred, sizeof(cred), raw_cred, 0))
		return ah_err_set(err, AH_EINVALID, "s3: access key too long");
	/* Parameters in byte order of their names, as the canonical query requires. */
	snprintf(query, sizeof(query),
	         "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%s&X-Amz-Date=%s"
	         "&X-Amz-Expires=%ld&X-Amz-SignedHeaders=host", cred, stamp, expires_s);
	if (append_extra(query, sizeof(query), extra))
		return ah_err_set(err, AH_EINVALID, "s3: presign parameters too long");
	int n = snprintf(creq, sizeof(creq), "%s\n%s\n%s\nhost:%s\n\nhost\nUNSIGNED-PAYLOAD",
	                 method, path, query, ah_s3_host(s));
	if (n < 0 || (size_t)n >= sizeof(creq))
		return ah_err_set(err, AH_EINVALID, "s3: request too long to sign");
	crypto_hash_sha256(h, (const unsigned char *)creq, (size_t)n);
	hex_of(hash_hex, h, 32);
	snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s\n%s", stamp, scope, hash_hex);
	signing_key(k, s, date);
	hmac(h, k, 32, sts);
	sodium_memzero(k, sizeof(k));
	hex_of(sig_hex, h, 32);
	n = snprintf(out, cap, "%s%s?%s&X-Amz-Signature=%s", s->endpoint, path, query, sig_hex);
	if (n < 0 || (size_t)n >= cap)
		return ah_err_set(err, AH_EINVALID, "s3: presigned URL longer than the buffer");
	return 0;
}
