/* Sessions and invocation history (placeholder until invocations land). */
#include "routes.h"

const ah_route ah_sessions_routes[] = {
	{NULL, NULL, NULL, 0, 0},
};
