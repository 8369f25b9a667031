/* Route tables and matching. Each handlers/<resource>.c exports a table of
 * ah_route rows ending with an all-zero row; the router merges them at start-up.
 * Adding an endpoint is one row and one function. */
#ifndef AH_HTTP_ROUTER_H
#define AH_HTTP_ROUTER_H

#include <stddef.h>

#include "http/http.h"

typedef int (*ah_handler_fn)(ah_req *r);

enum {
	AH_R_PUBLIC  = 1 << 0,  /* no authentication */
	AH_R_INVOKE  = 1 << 1,  /* counted in the invocation rate-limit class */
	AH_R_NO_RATE = 1 << 2,  /* not rate limited (health checks of load balancers) */
	AH_R_STREAM  = 1 << 3,  /* handler reads the body itself (large uploads) */
	AH_R_SCOPED  = 1 << 4,  /* {slug} names the caller's agent: load it with the key */
};

typedef struct ah_route {
	const char *method;
	const char *pattern;   /* below /api/v1; "{name}" matches one path segment */
	ah_handler_fn fn;
	unsigned flags;
	size_t body_limit;     /* bytes; 0 = the default (1 MiB) */
} ah_route;

#define AH_BODY_DEFAULT (1024 * 1024)

/* Every table, NULL-terminated (handlers/routes.c). */
extern const ah_route *const ah_route_tables[];

/* The authentication query of AH_R_SCOPED routes (handlers/agents.c): the API-key
 * columns (AH_AUTH_KEY_COLS) followed by the scoped row's, parameters (first path
 * parameter, key id). Saves the handler a round trip on most requests. */
extern const char ah_route_scope_sql[];

enum { AH_MATCH_OK = 0, AH_MATCH_NO_PATH = 1, AH_MATCH_NO_METHOD = 2 };

/* Finds the route for method and path; on AH_MATCH_OK fills r->params with the
 * decoded segments. On AH_MATCH_NO_METHOD, *allow lists the path's methods. */
int ah_route_match(ah_req *r, const char *method, const char *path,
                   const ah_route **out, const char **allow);

#endif
