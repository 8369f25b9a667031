/* An agent's `network` setting (issue 32): checked field by field, stored
 * as canonical JSON text in agents.network (NULL: mode "open"), shown on
 * the record, and passed to the runner with each call (invoke.c), which
 * turns it into the sandbox's firewall (lib/sandbox/egress.c). */
#include "agents.h"
#include "core/egress.h"
#include "core/config.h"

#include <stdio.h>
#include <string.h>

/* loc ["body","network","allow",i] for entry i (-1: ["body","network",key]). */
static void net_err(ah_req *r, const char *key, int i, const char *msg, const char *type)
{
	ah_verr(r, "body", "network", msg, type);
	json_object *e = json_object_array_get_idx(r->errors, json_object_array_length(r->errors) - 1);
	json_object *loc = json_object_object_get(e, "loc");
	json_object_array_add(loc, json_object_new_string(key));
	if (i >= 0)
		json_object_array_add(loc, json_object_new_int(i));
}

/* One entry, canonical, added to out; false after recording the error. */
static bool take_entry(ah_req *r, json_object *v, int i, json_object *out)
{
	const char *why;
	ah_egress_entry e;
	if (!json_object_is_type(v, json_type_string)) {
		net_err(r, "allow", i, "Input should be a valid string", "string_type");
		return false;
	}
	if ((size_t)json_object_get_string_len(v) != strlen(json_object_get_string(v)) ||
	    ah_egress_entry_parse(&e, json_object_get_string(v), &why) != 0) {
		net_err(r, "allow", i, why, "value_error");
		return false;
	}
	if (!e.is_name && ah_egress_net_forbidden(e.addr, e.bits)) {
		net_err(r, "allow", i, "Link-local addresses (cloud metadata) are never allowed", "value_error");
		return false;
	}
	if (!e.is_name && ah_egress_net_private(e.addr, e.bits) &&
	    !ah_settings_of(r->cfg)->sandbox.egress_allow_private) {
		net_err(r, "allow", i, "Loopback, private and reserved ranges are not allowed on this "
		        "server (the operator's egress_allow_private)", "value_error");
		return false;
	}
	char buf[AH_EGRESS_MAX_ENTRY + 1];
	ah_egress_entry_format(&e, buf, sizeof buf);
	json_object_array_add(out, json_object_new_string(buf));
	return true;
}

static bool take_allow(ah_req *r, json_object *allow, json_object *out)
{
	if (!allow || json_object_is_type(allow, json_type_null))
		return true;
	if (!json_object_is_type(allow, json_type_array)) {
		net_err(r, "allow", -1, "Input should be a valid list", "list_type");
		return false;
	}
	size_t n = json_object_array_length(allow);
	if (n > AH_EGRESS_MAX_ENTRIES) {
		net_err(r, "allow", -1, "List should have at most 64 items", "too_long");
		return false;
	}
	bool ok = true;
	for (size_t i = 0; i < n; i++)
		ok &= take_entry(r, json_object_array_get_idx(allow, i), (int)i, out);
	return ok;
}

/* The object's keys are mode and allow; anything else is refused. */
static bool keys_ok(ah_req *r, json_object *net)
{
	bool ok = true;
	json_object_object_foreach(net, k, v) {
		(void)v;
		if (strcmp(k, "mode") != 0 && strcmp(k, "allow") != 0) {
			net_err(r, k, -1, "Extra inputs are not permitted", "extra_forbidden");
			ok = false;
		}
	}
	return ok;
}

static const char *canonical(ah_req *r, json_object *net)
{
	json_object *mode = NULL, *allow = NULL;
	json_object_object_get_ex(net, "mode", &mode);
	json_object_object_get_ex(net, "allow", &allow);
	const char *m = mode && json_object_is_type(mode, json_type_string) ? json_object_get_string(mode) : NULL;
	bool ok = keys_ok(r, net);
	if (!m || (strcmp(m, "open") != 0 && strcmp(m, "allow") != 0)) {
		net_err(r, "mode", -1, "Input should be 'open' or 'allow'", mode ? "enum" : "missing");
		return NULL;
	}
	json_object *list = ah_json_own(r, json_object_new_array());
	if (!take_allow(r, allow, list) || !ok)
		return NULL;
	if (strcmp(m, "open") == 0) {
		if (json_object_array_length(list) > 0)
			net_err(r, "allow", -1, "Only used with mode 'allow'", "value_error");
		return NULL;
	}
	json_object *c = ah_json_own(r, json_object_new_object());
	json_object_object_add(c, "mode", json_object_new_string("allow"));
	json_object_object_add(c, "allow", json_object_get(list));
	return ah_sprintf(r->arena, "%s", json_object_to_json_string_ext(c, JSON_C_TO_STRING_PLAIN));
}

void ah_agent_network_field(ah_req *r, json_object *o, const char **out, bool *present)
{
	json_object *net = NULL;
	*out = NULL;
	*present = json_object_object_get_ex(o, "network", &net);
	if (!*present || !net || json_object_is_type(net, json_type_null))
		return;
	if (!json_object_is_type(net, json_type_object)) {
		ah_verr(r, "body", "network", "Input should be a valid object", "model_type");
		return;
	}
	*out = canonical(r, net);
}

json_object *ah_agent_network_json(const char *stored)
{
	json_object *v = stored ? json_tokener_parse(stored) : NULL;
	if (v && json_object_is_type(v, json_type_object))
		return v;
	json_object_put(v);
	v = json_object_new_object();
	json_object_object_add(v, "mode", json_object_new_string("open"));
	json_object_object_add(v, "allow", json_object_new_array());
	return v;
}
