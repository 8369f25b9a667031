/* See json.h. */
#include "core/json.h"

const char *ah_json_get_str(json_object *o, const char *key)
{
	json_object *v;
	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}
