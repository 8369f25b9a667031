/* Fuzz target: agent.json / castari.json as a user uploads it. Property: an
 * accepted manifest's entrypoint is a safe relative path and its slug, when
 * given, a valid slug. */
#include "deploy/deploy.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *json = malloc(size + 1);
	if (!json)
		return 0;
	memcpy(json, data, size);
	json[size] = '\0';
	struct ah_manifest m;
	ah_err err = {0};
	const char *file = size % 2 ? "agent.json" : "castari.json";
	if (ah_manifest_parse(&m, file, json, size, &err) == 0) {
		if (ah_deploy_path_check(m.entrypoint) != 0)
			__builtin_trap();
	} else if (!err.msg[0]) {
		__builtin_trap();
	}
	free(json);
	return 0;
}
