/* GCS with a service-account key, as Google's client libraries do it: an
 * RS256-signed JWT (the key's own private_key) exchanged at the key's
 * token_uri for an access token, then one JSON API request on the bucket.
 * endpoint_url, when set, replaces https://storage.googleapis.com (tests
 * serve both on loopback). RSA needs OpenSSL's libcrypto, which the project
 * links already for RS256 JWT logins (lib/auth/jwt.c). */
#include "buckets/internal.h"
#include "core/util.h"

#include <json-c/json.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sodium.h>
#include <string.h>
#include <time.h>

#define GCS_DEFAULT "https://storage.googleapis.com"
#define GCS_SCOPE "https://www.googleapis.com/auth/devstorage.read_write"

static char *b64url(ah_arena *a, const void *p, size_t n)
{
	size_t cap = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	char *out = ah_alloc(a, cap);
	return sodium_bin2base64(out, cap, p, n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

/* RS256 over data with a PEM key; NULL when the key cannot be used. */
static char *rs256(ah_arena *a, const char *pem, const char *data)
{
	BIO *bio = BIO_new_mem_buf(pem, -1);
	EVP_PKEY *key = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char sig[1024];
	size_t len = sizeof(sig);
	char *out = NULL;
	if (key && md && EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA &&
	    EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
	    EVP_DigestSign(md, sig, &len, (const unsigned char *)data, strlen(data)) == 1)
		out = b64url(a, sig, len);
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(key);
	BIO_free(bio);
	return out;
}

static char *jwt(ah_arena *a, const ah_bucket_creds *c)
{
	static const char header[] = "{\"alg\":\"RS256\",\"typ\":\"JWT\"}";
	long long now = (long long)time(NULL);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "iss", json_object_new_string(c->client_email));
	json_object_object_add(o, "scope", json_object_new_string(GCS_SCOPE));
	json_object_object_add(o, "aud", json_object_new_string(c->token_uri));
	json_object_object_add(o, "iat", json_object_new_int64(now));
	json_object_object_add(o, "exp", json_object_new_int64(now + 3600));
	const char *claims = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	char *input = ah_sprintf(a, "%s.%s", b64url(a, header, strlen(header)),
	                         b64url(a, claims, strlen(claims)));
	json_object_put(o);
	char *sig = rs256(a, c->private_key, input);
	return sig ? ah_sprintf(a, "%s.%s", input, sig) : NULL;
}

/* The access_token of a token answer, or NULL. */
static char *token_of(ah_arena *a, const char *body)
{
	json_object *o = json_tokener_parse(body), *v;
	char *t = NULL;
	if (o && json_object_object_get_ex(o, "access_token", &v) &&
	    json_object_is_type(v, json_type_string) && *json_object_get_string(v))
		t = ah_strdup(a, json_object_get_string(v));
	if (o)
		json_object_put(o);
	return t;
}

static int exchange(ah_arena *a, const ah_bucket_target *t, ah_bucket_guard *g, char **token,
                    const char **message)
{
	ah_bucket_body *body = ah_alloc(a, sizeof(*body));
	long status;
	char *assertion = jwt(a, t->creds);
	*token = NULL;
	if (!assertion) {
		*message = "The service account's private_key is not a usable RSA key; download a new "
		           "key file for the service account";
		return 0;
	}
	const char *form = ah_sprintf(a, "grant_type=urn%%3Aietf%%3Aparams%%3Aoauth%%3Agrant-type"
	                              "%%3Ajwt-bearer&assertion=%s", assertion);
	if (ah_bucket_http(a, g, t->creds->token_uri, form, NULL, &status, body, message) != 0)
		return AH_EFAIL;
	if (*message)
		return 0;
	if (status == 400 || status == 401 || status == 403)
		*message = ah_sprintf(a, "The service account's credentials were rejected by its "
		                      "token_uri (HTTP %ld): the key may have been deleted or disabled, "
		                      "or belongs to another project; set a current key", status);
	else if (status != 200 || !(*token = token_of(a, body->buf)))
		*message = ah_sprintf(a, "The token_uri answered HTTP %ld without an access token; "
		                      "check the key's token_uri", status);
	return 0;
}

const char *ah_bucket_gcs_api_base(ah_arena *a, const char *endpoint_url)
{
	const char *base = endpoint_url ? endpoint_url : GCS_DEFAULT;
	size_t n = strlen(base);
	while (n > 0 && base[n - 1] == '/')
		n--;
	bool has_path = n >= 11 && strncmp(base + n - 11, "/storage/v1", 11) == 0;
	return ah_sprintf(a, "%.*s%s", (int)n, base, has_path ? "" : "/storage/v1");
}

int ah_bucket_probe_gcs(ah_arena *a, const ah_bucket_target *t, bool *ok, const char **message)
{
	ah_bucket_body *body = ah_alloc(a, sizeof(*body));
	ah_bucket_guard g = {.policy = t->policy,
	                     .deadline_ms = ah_now_ms() + AH_BUCKET_TIMEOUT_S * 1000};
	char *token;
	long status;
	*ok = false;
	int rc = exchange(a, t, &g, &token, message);
	if (rc != 0 || !token)
		return rc;
	const char *url = ah_sprintf(a, "%s/b/%s/o?maxResults=1",
	                             ah_bucket_gcs_api_base(a, t->endpoint_url), t->bucket_name);
	const char *auth = ah_sprintf(a, "Authorization: Bearer %s", token);
	if (ah_bucket_http(a, &g, url, NULL, auth, &status, body, message) != 0)
		return AH_EFAIL;
	if (*message)
		return 0;
	if (status == 200) {
		*ok = true;
		*message = ah_sprintf(a, "Listed bucket '%s' with the service account's credentials",
		                      t->bucket_name);
	} else if (status == 404) {
		*message = ah_sprintf(a, "Bucket '%s' does not exist (check bucket_name)", t->bucket_name);
	} else if (status == 401 || status == 403) {
		*message = ah_sprintf(a, "The service account may not list bucket '%s' (HTTP %ld): "
		                      "grant it a Storage role on the bucket", t->bucket_name, status);
	} else {
		*message = ah_sprintf(a, "The bucket request answered HTTP %ld", status);
	}
	return 0;
}
