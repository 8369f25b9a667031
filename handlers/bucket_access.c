/* /buckets/{slug}/credentials and /buckets/{slug}/test: the only code of the
 * API that handles a bucket's credentials (those POST /buckets brings along
 * too, through ah_bucket_creds_fields/_store). They are sealed like secrets
 * (crypto_secretbox, a fresh nonce), opened only to make /test's request,
 * never returned, never logged (errors name fields, never values). */
#include "buckets_api.h"
#include "routes.h"
#include "core/util.h"
#include "crypto/crypto.h"

#include <string.h>

#define SA_JSON_MAX (64 * 1024)

static const char SQL_SET[] =
	"UPDATE buckets SET cred_nonce = ?, cred_sealed = ?, updated_at = NOW(3) WHERE id = ?";
static const char SQL_SEALED[] = "SELECT cred_nonce, cred_sealed FROM buckets WHERE id = ?";

/* An access key id or secret: printable ASCII without spaces. */
static void key_field(ah_req *r, json_object *o, const char *name, unsigned flags, const char **out)
{
	if (ah_field_str(r, o, name, flags, 1, 256, out, NULL) != 0 || !*out)
		return;
	for (const char *p = *out; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f) {
			ah_verr(r, "body", name, "Value should be printable ASCII without spaces",
			        "string_pattern_mismatch");
			*out = NULL;
			return;
		}
}

int ah_bucket_creds_fields(ah_req *r, json_object *o, ah_provider p, bool required,
                           ah_bucket_creds *c, bool *any)
{
	unsigned flags = required ? AH_F_REQUIRED : 0;
	memset(c, 0, sizeof(*c));
	if (p != AH_PROVIDER_GCS) {
		if (!required && json_object_object_get_ex(o, "service_account_json", NULL))
			ah_verr(r, "body", "service_account_json", "Only gcs buckets take a service account",
			        "extra_forbidden");
		key_field(r, o, "access_key_id", flags, &c->access_key_id);
		key_field(r, o, "secret_access_key", flags, &c->secret_access_key);
		*any = c->access_key_id || c->secret_access_key ||
		       json_object_object_get_ex(o, "access_key_id", NULL) ||
		       json_object_object_get_ex(o, "secret_access_key", NULL);
		if (*any && !r->errors && (!c->access_key_id || !c->secret_access_key))
			ah_verr(r, "body", c->access_key_id ? "secret_access_key" : "access_key_id",
			        "Field required with the other key", "missing");
		return r->errors ? AH_EINVALID : 0;
	}
	if (!required && (json_object_object_get_ex(o, "access_key_id", NULL) ||
	                  json_object_object_get_ex(o, "secret_access_key", NULL)))
		ah_verr(r, "body", "access_key_id", "gcs buckets take a service_account_json",
		        "extra_forbidden");
	const char *json = NULL;
	ah_err err;
	ah_addr_policy pol = ah_bucket_policy(r->cfg);
	if (ah_field_str(r, o, "service_account_json", flags, 2, SA_JSON_MAX, &json, NULL) == 0 && json &&
	    ah_bucket_sa_parse(r->arena, c, json, &pol, &err) != 0)
		ah_verr(r, "body", "service_account_json", err.msg, "value_error");
	*any = json_object_object_get_ex(o, "service_account_json", NULL);
	return r->errors ? AH_EINVALID : 0;
}

int ah_bucket_creds_store(ah_req *r, const char *bucket_id, const ah_bucket_creds *c)
{
	const char *doc = ah_bucket_creds_encode(r->arena, c);
	unsigned char nonce[AH_NONCE_BYTES], *ct;
	size_t ctlen;
	if (ah_crypto_seal(r->arena, nonce, &ct, &ctlen, doc, strlen(doc)) != 0)
		return AH_EFAIL;
	return ah_db_exec(r->db, NULL, SQL_SET, "bbs", nonce, (size_t)AH_NONCE_BYTES, ct, ctlen, bucket_id);
}

static int set_credentials(ah_req *r)
{
	static const char *const keys[] = {"access_key_id", "secret_access_key", NULL};
	static const char *const sa[] = {"service_account_json", NULL};
	const ah_bucket *b;
	ah_bucket_creds c;
	json_object *o;
	bool any;
	int rc = ah_bucket_load(r, &b);
	if (rc != 0 || (rc = ah_body_object(r, &o, b->provider == AH_PROVIDER_GCS ? sa : keys)) != 0)
		return rc;
	ah_bucket_creds_fields(r, o, b->provider, true, &c, &any);
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	if (ah_db_begin(r->db) != 0)
		return AH_EFAIL;
	/* Mounts started with the old credentials keep them until a redeploy. */
	if (ah_bucket_creds_store(r, b->id, &c) != 0 || ah_bucket_flag_agents(r, b->id) != 0 ||
	    ah_db_commit(r->db) != 0) {
		ah_db_rollback(r->db);
		return AH_EFAIL;
	}
	json_object *out = json_object_new_object();
	ah_json_bool(out, "has_credentials", true);
	return ah_reply_json(r, 200, out);
}

static int reply_test(ah_req *r, bool ok, const char *message)
{
	json_object *o = json_object_new_object();
	ah_json_bool(o, "ok", ok);
	ah_json_str(o, "message", message);
	return ah_reply_json(r, 200, o);
}

/* b's credentials, opened into c; *none when they were never set. */
static int open_creds(ah_req *r, const ah_bucket *b, ah_bucket_creds *c, bool *none)
{
	ah_rows rows;
	char *doc;
	size_t len;
	ah_err err;
	*none = false;
	if (ah_db_query(r->db, r->arena, &rows, SQL_SEALED, "s", b->id) != 0 || rows.n != 1)
		return AH_EFAIL;
	if (!rows.v[0][0] || !rows.v[0][1] || rows.len[0][0] != AH_NONCE_BYTES) {
		*none = true;
		return 0;
	}
	if (ah_crypto_open(r->arena, &doc, &len, (const unsigned char *)rows.v[0][0],
	                   (const unsigned char *)rows.v[0][1], rows.len[0][1]) != 0)
		return AH_EFAIL;
	int rc = ah_bucket_creds_decode(r->arena, c, b->provider, doc, &err);
	if (rc == AH_ENOTFOUND)
		*none = true;
	return rc == AH_ENOTFOUND ? 0 : rc;
}

static int test_bucket(ah_req *r)
{
	const ah_bucket *b;
	ah_bucket_creds c;
	bool none, ok = false;
	const char *message = NULL;
	int rc = ah_bucket_load(r, &b);
	/* No body is read: the request is made with what is stored. */
	if (rc != 0 || (rc = open_creds(r, b, &c, &none)) != 0)
		return rc;
	if (none)
		return reply_test(r, false, "No credentials are set for this bucket; set them with "
		                  "POST /api/v1/buckets/{slug}/credentials");
	ah_bucket_target t = {
		.provider = b->provider, .bucket_name = b->bucket_name, .region = b->region,
		.endpoint_url = b->endpoint_url, .prefix = "", .creds = &c,
		.policy = ah_bucket_policy(r->cfg),
	};
	if (ah_bucket_probe(r->arena, &t, &ok, &message) != 0)
		return AH_EFAIL;
	return reply_test(r, ok, message);
}

const ah_route ah_bucket_access_routes[] = {
	{"POST", "/buckets/{slug}/credentials", set_credentials, 0, 0},
	{"POST", "/buckets/{slug}/test", test_bucket, 0, 0},
	{NULL, NULL, NULL, 0, 0},
};
