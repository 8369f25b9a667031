/* Reading JSON objects the same way everywhere (json-c). */
#ifndef AH_CORE_JSON_H
#define AH_CORE_JSON_H

#include <json-c/json.h>

/* The string member `key` of o, NULL when absent or of another type. */
const char *ah_json_get_str(json_object *o, const char *key);

#endif
