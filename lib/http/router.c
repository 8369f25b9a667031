/* Segment-by-segment matching of the merged route tables. Path segments are
 * percent-decoded one by one, so an encoded '/' never splits a segment. */
#include "http/router.h"
#include "http/internal.h"

#include <stdbool.h>
#include <string.h>

/* Whether a path has a pattern's segments: the literal ones equal, a
 * "{name}" one not empty. Allocates nothing: most patterns fail here, on
 * their first segment, and only the few that pass are decoded (match). */
static bool shape(const char *pat, const char *path)
{
	while (*pat && *path) {
		if (*pat++ != '/' || *path++ != '/')
			return false;
		size_t pl = strcspn(pat, "/"), sl = strcspn(path, "/");
		if (pat[0] == '{' ? sl == 0 : pl != sl || memcmp(pat, path, pl) != 0)
			return false;
		pat += pl;
		path += sl;
	}
	return *pat == '\0' && *path == '\0';
}

/* Decodes the parameters of a pattern whose shape the path has (shape():
 * the callers check it first); false for a segment that names no resource. */
static bool match(ah_req *r, const char *pat, const char *path, const char **params, size_t *np)
{
	*np = 0;
	while (*pat) {
		pat++;
		path++;
		size_t pl = strcspn(pat, "/"), sl = strcspn(path, "/");
		if (pat[0] == '{') {
			size_t dl;
			char *seg = ah_url_decode(r->arena, path, sl, false, &dl);
			/* Embedded NULs never name a resource. */
			if (strlen(seg) != dl || *np >= AH_MAX_PARAMS)
				return false;
			params[(*np)++] = seg;
		}
		pat += pl;
		path += sl;
	}
	return true;
}

/* Literal segments of a pattern: a path is served by the routes that name
 * most of it literally, so "/files/usage" is never taken for "/files/{id}". */
static int literals(const char *pat)
{
	int n = 0;
	for (const char *p = pat; (p = strchr(p, '/')); p++)
		n += p[1] != '{';
	return n;
}

int ah_route_match(ah_req *r, const ah_route *const *tables, const char *method,
                   const char *path, const ah_route **out, const char **allow)
{
	const char *params[AH_MAX_PARAMS];
	size_t np;
	char *methods = NULL;
	int best = -1;
	/* A trailing slash names the same resource. */
	size_t len = strlen(path);
	if (len > 1 && path[len - 1] == '/')
		path = ah_strndup(r->arena, path, len - 1);
	for (size_t t = 0; tables[t]; t++)
		for (const ah_route *rt = tables[t]; rt->method; rt++)
			if (shape(rt->pattern, path) && literals(rt->pattern) > best &&
			    match(r, rt->pattern, path, params, &np))
				best = literals(rt->pattern);
	for (size_t t = 0; tables[t]; t++) {
		for (const ah_route *rt = tables[t]; rt->method; rt++) {
			if (!shape(rt->pattern, path) || literals(rt->pattern) != best ||
			    !match(r, rt->pattern, path, params, &np))
				continue;
			if (strcmp(rt->method, method) == 0) {
				memcpy(r->params, params, sizeof(params[0]) * np);
				r->nparams = np;
				*out = rt;
				return AH_MATCH_OK;
			}
			methods = ah_sprintf(r->arena, "%s%s%s", methods ? methods : "",
			                     methods ? ", " : "", rt->method);
		}
	}
	*allow = methods;
	return methods ? AH_MATCH_NO_METHOD : AH_MATCH_NO_PATH;
}
