/* The JSON request body and field-by-field validation in the contract's 422 shape:
 * {"detail": [{"loc": ["body","name"], "msg": "...", "type": "..."}]}. */
#include "http/http.h"
#include "core/util.h"

#include <errno.h>
#include <string.h>

#define MAX_DEPTH 32

static void put_json(void *p)
{
	json_object_put(p);
}

json_object *ah_json_own(ah_req *r, json_object *o)
{
	if (o)
		ah_arena_on_cleanup(r->arena, put_json, o);
	return o;
}

void ah_verr(ah_req *r, const char *where, const char *field, const char *msg, const char *type)
{
	if (!r->errors)
		r->errors = ah_json_own(r, json_object_new_array());
	json_object *e = json_object_new_object();
	json_object *loc = json_object_new_array();
	json_object_array_add(loc, json_object_new_string(where));
	if (field)
		json_object_array_add(loc, json_object_new_string(field));
	json_object_object_add(e, "loc", loc);
	json_object_object_add(e, "msg", json_object_new_string(msg));
	json_object_object_add(e, "type", json_object_new_string(type));
	json_object_array_add(r->errors, e);
}

int ah_verr_reply(ah_req *r)
{
	if (!r->errors || json_object_array_length(r->errors) == 0)
		return 0;
	json_object *body = json_object_new_object();
	json_object_object_add(body, "detail", json_object_get(r->errors));
	ah_reply_json(r, 422, body);
	return AH_EDONE;
}

static int parse_json(ah_req *r, json_object **out)
{
	*out = NULL;
	if (!r->body || r->body_len == 0) {
		ah_verr(r, "body", NULL, "Field required", "missing");
		return AH_EINVALID;
	}
	json_tokener *tok = json_tokener_new_ex(MAX_DEPTH);
	if (!tok)
		return AH_EFAIL;
	/* Strict JSON and valid UTF-8 only: anything else is the client's mistake. */
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	json_object *o = json_tokener_parse_ex(tok, r->body, (int)r->body_len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	size_t used = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	ah_json_own(r, o);
	/* Trailing non-space after the value is as malformed as a missing brace. */
	/* (strchr also finds the terminator: a NUL byte is not whitespace.) */
	while (o && used < r->body_len && r->body[used] && strchr(" \t\r\n", r->body[used]))
		used++;
	if (!o || jerr != json_tokener_success || used != r->body_len) {
		const char *why = jerr == json_tokener_error_depth      ? "JSON nested too deeply"
		                  : jerr == json_tokener_success        ? "Unexpected data after the JSON value"
		                  : jerr == json_tokener_continue       ? "Unexpected end of JSON input"
		                                                        : json_tokener_error_desc(jerr);
		ah_verr(r, "body", NULL, ah_sprintf(r->arena, "JSON decode error: %s", why),
		        "json_invalid");
		return AH_EINVALID;
	}
	/* json-c's UTF-8 check lets overlongs, encoded surrogates and code points past
	 * U+10FFFF through; MariaDB would refuse some (a 500) and store others. */
	if (!ah_utf8_valid(r->body, r->body_len)) {
		ah_verr(r, "body", NULL, "JSON decode error: invalid utf-8 string", "json_invalid");
		return AH_EINVALID;
	}
	*out = o;
	return 0;
}

int ah_body_object(ah_req *r, json_object **out, const char *const *allowed)
{
	json_object *o;
	if (parse_json(r, &o) != 0)
		return ah_verr_reply(r) ? AH_EDONE : AH_EFAIL;
	if (!json_object_is_type(o, json_type_object)) {
		ah_verr(r, "body", NULL, "Input should be a valid dictionary or object", "model_type");
		return ah_verr_reply(r);
	}
	json_object_object_foreach(o, key, val) {
		(void)val;
		bool ok = false;
		for (size_t i = 0; allowed && allowed[i]; i++)
			if (strcmp(allowed[i], key) == 0)
				ok = true;
		if (!ok)
			ah_verr(r, "body", key, "Extra inputs are not permitted", "extra_forbidden");
	}
	/* Unknown keys stay pending: the handler's own field checks add theirs, and
	 * its ah_verr_reply answers with one entry per offending field. */
	*out = o;
	return 0;
}

/* Common part of the field readers: presence, null handling, required. Returns 1
 * when the caller should go on checking the value. */
static int field_lookup(ah_req *r, json_object *o, const char *name, unsigned flags,
                        json_object **val, bool *present)
{
	bool have = json_object_object_get_ex(o, name, val);
	if (present)
		*present = have;
	if (!have) {
		if (flags & AH_F_REQUIRED)
			ah_verr(r, "body", name, "Field required", "missing");
		return (flags & AH_F_REQUIRED) ? AH_EINVALID : 0;
	}
	if (*val == NULL) {
		if (flags & AH_F_NULLABLE)
			return 0;
		ah_verr(r, "body", name, "Input should not be null", "null_forbidden");
		return AH_EINVALID;
	}
	return 1;
}

int ah_field_str(ah_req *r, json_object *o, const char *name, unsigned flags,
                 size_t minlen, size_t maxlen, const char **out, bool *present)
{
	json_object *v;
	*out = NULL;
	int rc = field_lookup(r, o, name, flags, &v, present);
	if (rc <= 0)
		return rc;
	if (!json_object_is_type(v, json_type_string)) {
		ah_verr(r, "body", name, "Input should be a valid string", "string_type");
		return AH_EINVALID;
	}
	const char *s = json_object_get_string(v);
	size_t len = (size_t)json_object_get_string_len(v);
	if (strlen(s) != len) {
		ah_verr(r, "body", name, "String should not contain NUL characters", "string_pattern_mismatch");
		return AH_EINVALID;
	}
	/* Lengths count characters, as users think of them, not bytes. */
	size_t chars = 0;
	for (size_t i = 0; i < len; i++)
		chars += ((unsigned char)s[i] & 0xC0) != 0x80;
	if (chars < minlen) {
		ah_verr(r, "body", name, ah_sprintf(r->arena, "String should have at least %zu character%s",
		        minlen, minlen == 1 ? "" : "s"), "string_too_short");
		return AH_EINVALID;
	}
	if (chars > maxlen) {
		ah_verr(r, "body", name, ah_sprintf(r->arena, "String should have at most %zu characters",
		        maxlen), "string_too_long");
		return AH_EINVALID;
	}
	*out = s;
	return 0;
}

int ah_field_int(ah_req *r, json_object *o, const char *name, unsigned flags,
                 long long min, long long max, long long *out, bool *present)
{
	json_object *v;
	int rc = field_lookup(r, o, name, flags, &v, present);
	if (rc <= 0)
		return rc;
	if (!json_object_is_type(v, json_type_int)) {
		ah_verr(r, "body", name, "Input should be a valid integer", "int_type");
		return AH_EINVALID;
	}
	errno = 0;
	long long n = json_object_get_int64(v);
	if (n < min) {
		ah_verr(r, "body", name, ah_sprintf(r->arena, "Input should be greater than or equal to %lld", min),
		        "greater_than_equal");
		return AH_EINVALID;
	}
	if (n > max) {
		ah_verr(r, "body", name, ah_sprintf(r->arena, "Input should be less than or equal to %lld", max),
		        "less_than_equal");
		return AH_EINVALID;
	}
	*out = n;
	return 0;
}

int ah_field_bool(ah_req *r, json_object *o, const char *name, unsigned flags,
                  bool *out, bool *present)
{
	json_object *v;
	int rc = field_lookup(r, o, name, flags, &v, present);
	if (rc <= 0)
		return rc;
	if (!json_object_is_type(v, json_type_boolean)) {
		ah_verr(r, "body", name, "Input should be a valid boolean", "bool_type");
		return AH_EINVALID;
	}
	*out = json_object_get_boolean(v);
	return 0;
}
