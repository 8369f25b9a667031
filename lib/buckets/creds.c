/* Credentials: the GCS key file's shape, and the JSON document that is sealed
 * at rest. Never logged: errors name fields, never values. */
#include "buckets/buckets.h"

#include <json-c/json.h>
#include <string.h>

/* A string member of o copied into the arena, or NULL. */
static const char *member(ah_arena *a, json_object *o, const char *key)
{
	json_object *v;
	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	const char *s = json_object_get_string(v);
	return *s ? ah_strdup(a, s) : NULL;
}

int ah_bucket_sa_parse(ah_arena *a, ah_bucket_creds *out, const char *json,
                       const ah_addr_policy *pol, ah_err *err)
{
	json_object *o = json_tokener_parse(json);
	int rc = 0;
	if (!o || !json_object_is_type(o, json_type_object)) {
		rc = ah_err_set(err, AH_EINVALID, "Value should be a service account key file (JSON)");
		goto done;
	}
	static const char *const need[] = {"client_email", "private_key", "token_uri"};
	const char *got[3];
	for (int i = 0; i < 3; i++)
		if (!(got[i] = member(a, o, need[i]))) {
			rc = ah_err_set(err, AH_EINVALID, "The service account key lacks \"%s\"", need[i]);
			goto done;
		}
	const char *type = member(a, o, "type");
	if (type && strcmp(type, "service_account") != 0) {
		rc = ah_err_set(err, AH_EINVALID, "The key's \"type\" should be \"service_account\"");
		goto done;
	}
	if (!strstr(got[1], "-----BEGIN") || !strchr(got[0], '@')) {
		rc = ah_err_set(err, AH_EINVALID, "The key's private_key should be a PEM key and "
		                "client_email an email address");
		goto done;
	}
	ah_err uerr;
	if (ah_bucket_endpoint_check(got[2], pol, true, &uerr) != 0) {
		rc = ah_err_set(err, AH_EINVALID, "The key's token_uri is not allowed: %s", uerr.msg);
		goto done;
	}
	out->sa_json = ah_strdup(a, json);
	out->client_email = got[0];
	out->private_key = got[1];
	out->token_uri = got[2];
done:
	if (o)
		json_object_put(o);
	return rc;
}

char *ah_bucket_creds_encode(ah_arena *a, const ah_bucket_creds *c)
{
	json_object *o = json_object_new_object();
	if (c->sa_json)
		json_object_object_add(o, "service_account_json", json_object_new_string(c->sa_json));
	if (c->access_key_id)
		json_object_object_add(o, "access_key_id", json_object_new_string(c->access_key_id));
	if (c->secret_access_key)
		json_object_object_add(o, "secret_access_key",
		                       json_object_new_string(c->secret_access_key));
	char *s = ah_strdup(a, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return s;
}

int ah_bucket_creds_decode(ah_arena *a, ah_bucket_creds *out, ah_provider p, const char *doc,
                           ah_err *err)
{
	memset(out, 0, sizeof(*out));
	json_object *o = json_tokener_parse(doc);
	int rc = 0;
	if (!o || !json_object_is_type(o, json_type_object)) {
		rc = ah_err_set(err, AH_EFAIL, "stored credentials are not readable");
	} else if (p == AH_PROVIDER_GCS) {
		const char *sa = member(a, o, "service_account_json");
		/* Stored keys were checked when set; the endpoint rule is checked
		 * again by the connection itself. */
		static const ah_addr_policy any = {.allow_private = true};
		rc = sa ? ah_bucket_sa_parse(a, out, sa, &any, err)
		        : ah_err_set(err, AH_ENOTFOUND, "no service account key is stored");
	} else {
		out->access_key_id = member(a, o, "access_key_id");
		out->secret_access_key = member(a, o, "secret_access_key");
		if (!out->access_key_id || !out->secret_access_key)
			rc = ah_err_set(err, AH_ENOTFOUND, "no access key is stored");
	}
	if (o)
		json_object_put(o);
	return rc;
}
