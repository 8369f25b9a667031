/* Fuzz target: the router over the real route tables of agenthost-api.
 * Input: METHOD " " PATH. Property: a match fills no more parameters than the
 * route has, each a NUL-terminated string of the request's arena. */
#include "routes.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = malloc(size + 1);
	if (!in)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';
	char *sp = strchr(in, ' ');
	const char *method = sp ? in : "GET", *path = sp ? sp + 1 : in;
	if (sp)
		*sp = '\0';
	ah_req r = { .arena = ah_arena_new() };
	const ah_route *rt = NULL;
	const char *allow = NULL;
	int m = ah_route_match(&r, ah_route_tables, method, path, &rt, &allow);
	if (m == AH_MATCH_OK) {
		if (!rt || !rt->fn || r.nparams > AH_MAX_PARAMS)
			__builtin_trap();
		for (size_t i = 0; i < r.nparams; i++)
			if (strlen(r.params[i]) > strlen(path))
				__builtin_trap();
	} else if (m == AH_MATCH_NO_METHOD && !allow) {
		__builtin_trap();
	}
	ah_arena_destroy(r.arena);
	free(in);
	return 0;
}
