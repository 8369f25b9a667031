/* Route tables and matching. Each handlers/<resource>.c exports a table of
 * ah_route rows ending with an all-zero row; the program hands the list of
 * tables to the API workers (api/api.h), which match each request against it.
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
};

typedef struct ah_route {
	const char *method;
	const char *pattern;   /* below /api/v1; "{name}" matches one path segment */
	ah_handler_fn fn;
	unsigned flags;
	size_t body_limit;     /* bytes; 0 = the default (1 MiB) */
	/* Scoped routes: the first path parameter names a row of the caller's
	 * (e.g. their agent) that the authentication query loads along with the
	 * key, saving the handler a round trip. The query's columns are the
	 * API-key columns (AH_AUTH_KEY_COLS) followed by the row's, its
	 * parameters (first path parameter, key id); the row's columns fill a
	 * record of `size` bytes by the column table (db/record.h) before the
	 * handler runs. NULL: not scoped. */
	const struct ah_scope *scope;
} ah_route;

struct ah_col;
typedef struct ah_scope {
	const char *sql;
	const struct ah_col *cols;
	size_t ncols, size;
	/* Columns the query appends after the record's, for the route's own use
	 * (r->scope_extra); 0 for most. */
	size_t nextra;
} ah_scope;

#define AH_BODY_DEFAULT (1024 * 1024)

enum { AH_MATCH_OK = 0, AH_MATCH_NO_PATH = 1, AH_MATCH_NO_METHOD = 2 };

/* Finds the route for method and path in tables (NULL-terminated); on
 * AH_MATCH_OK fills r->params with the decoded segments. On
 * AH_MATCH_NO_METHOD, *allow lists the path's methods. */
int ah_route_match(ah_req *r, const ah_route *const *tables, const char *method,
                   const char *path, const ah_route **out, const char **allow);

#endif
