/* Usage (placeholder until invocations land). */
#include "routes.h"

const ah_route ah_usage_routes[] = {
	{NULL, NULL, NULL, 0, 0},
};
