/* Unit test of lib/http/router.c: segment-by-segment matching of merged route
 * tables, percent-decoding of path parameters, 404 vs 405 with the Allow list.
 * The route tables here are the test's own (the router matches whatever list
 * it is given), so the test does not depend on the handlers. Printed as TAP. */
#include "http/router.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tap.h"

static int h_list(ah_req *r) { (void)r; return 1; }
static int h_create(ah_req *r) { (void)r; return 2; }
static int h_get(ah_req *r) { (void)r; return 3; }
static int h_patch(ah_req *r) { (void)r; return 4; }
static int h_delete(ah_req *r) { (void)r; return 5; }
static int h_secret_del(ah_req *r) { (void)r; return 6; }
static int h_health(ah_req *r) { (void)r; return 7; }
static int h_deploy(ah_req *r) { (void)r; return 8; }
static int h_four(ah_req *r) { (void)r; return 9; }

static const ah_route agents[] = {
	{"GET", "/agents", h_list, 0, 0},
	{"POST", "/agents", h_create, 0, 0},
	{"GET", "/agents/{slug}", h_get, 0, 0},
	{"PATCH", "/agents/{slug}", h_patch, 0, 0},
	{"DELETE", "/agents/{slug}", h_delete, 0, 0},
	{"POST", "/agents/{slug}/deploy", h_deploy, 0, 0},
	{NULL, NULL, NULL, 0, 0},
};
static const ah_route secrets[] = {
	{"DELETE", "/agents/{slug}/secrets/{key}", h_secret_del, 0, 0},
	{"GET", "/a/{p1}/b/{p2}/c/{p3}/d/{p4}", h_four, 0, 0},
	{NULL, NULL, NULL, 0, 0},
};
static const ah_route health[] = {
	{"GET", "/health", h_health, AH_R_PUBLIC | AH_R_NO_RATE, 0},
	{"GET", "/agents/usage", h_health, 0, 0},
	{NULL, NULL, NULL, 0, 0},
};

static const ah_route *const tables[] = {agents, secrets, health, NULL};

struct match_case {
	const char *desc;
	const char *method, *path;
	int want;               /* AH_MATCH_* */
	ah_handler_fn fn;       /* on AH_MATCH_OK */
	const char *p[4];       /* expected decoded params (NULL-terminated) */
	const char *allow;      /* on AH_MATCH_NO_METHOD */
};

static const struct match_case cases[] = {
	{"static route", "GET", "/agents", AH_MATCH_OK, h_list, {NULL}, NULL},
	{"a literal route wins over a parameter, in any table order", "GET", "/agents/usage",
	 AH_MATCH_OK, h_health, {NULL}, NULL},
	{"and the parameter route's methods are not the literal path's", "DELETE", "/agents/usage",
	 AH_MATCH_NO_METHOD, NULL, {NULL}, "GET"},
	{"same path, other method", "POST", "/agents", AH_MATCH_OK, h_create, {NULL}, NULL},
	{"trailing slash names the same resource", "GET", "/agents/", AH_MATCH_OK, h_list, {NULL}, NULL},
	{"one parameter", "GET", "/agents/my-agent", AH_MATCH_OK, h_get, {"my-agent"}, NULL},
	{"parameter with trailing slash", "PATCH", "/agents/x/", AH_MATCH_OK, h_patch, {"x"}, NULL},
	{"nested route", "POST", "/agents/a1/deploy", AH_MATCH_OK, h_deploy, {"a1"}, NULL},
	{"route from a second table", "DELETE", "/agents/a/secrets/KEY_1", AH_MATCH_OK, h_secret_del,
	 {"a", "KEY_1"}, NULL},
	{"four parameters", "GET", "/a/1/b/2/c/3/d/4", AH_MATCH_OK, h_four, {"1", "2", "3", "4"}, NULL},
	{"percent-decoded parameter", "GET", "/agents/%6D%79-agent", AH_MATCH_OK, h_get, {"my-agent"}, NULL},
	{"encoded slash stays inside the segment", "GET", "/agents/a%2Fb", AH_MATCH_OK, h_get, {"a/b"}, NULL},
	{"encoded slash never reaches a nested route", "DELETE", "/agents/a%2Fsecrets%2Fk", AH_MATCH_OK,
	 h_delete, {"a/secrets/k"}, NULL},
	{"plus is not a space in paths", "GET", "/agents/a+b", AH_MATCH_OK, h_get, {"a+b"}, NULL},
	{"malformed escape kept literally", "GET", "/agents/%zz", AH_MATCH_OK, h_get, {"%zz"}, NULL},
	{"truncated escape kept literally", "GET", "/agents/a%4", AH_MATCH_OK, h_get, {"a%4"}, NULL},
	{"lone percent kept literally", "GET", "/agents/%", AH_MATCH_OK, h_get, {"%"}, NULL},
	{"escape at the very end", "GET", "/agents/ab%41", AH_MATCH_OK, h_get, {"abA"}, NULL},
	{"double encoding decoded once", "GET", "/agents/%252F", AH_MATCH_OK, h_get, {"%2F"}, NULL},
	{"encoded NUL never matches", "GET", "/agents/%00", AH_MATCH_NO_PATH, NULL, {NULL}, NULL},
	{"encoded NUL inside never matches", "GET", "/agents/a%00b", AH_MATCH_NO_PATH, NULL, {NULL}, NULL},
	{"empty segment never matches", "GET", "/agents//deploy", AH_MATCH_NO_PATH, NULL, {NULL}, NULL},
	{"unknown path", "GET", "/nope", AH_MATCH_NO_PATH, NULL, {NULL}, NULL},
	{"root", "GET", "/", AH_MATCH_NO_PATH, NULL, {NULL}, NULL},
	{"prefix of a route", "GET", "/agent", AH_MATCH_NO_PATH, NULL, {NULL}, NULL},
	{"longer than a route", "GET", "/agents/a/deploy/x", AH_MATCH_NO_PATH, NULL, {NULL}, NULL},
	{"case matters", "GET", "/AGENTS", AH_MATCH_NO_PATH, NULL, {NULL}, NULL},
	{"two trailing slashes", "GET", "/agents//", AH_MATCH_NO_PATH, NULL, {NULL}, NULL},
	{"wrong method lists both", "PUT", "/agents", AH_MATCH_NO_METHOD, NULL, {NULL}, "GET, POST"},
	{"wrong method lists three", "POST", "/agents/x", AH_MATCH_NO_METHOD, NULL, {NULL},
	 "GET, PATCH, DELETE"},
	{"wrong method on a nested route", "GET", "/agents/x/deploy", AH_MATCH_NO_METHOD, NULL, {NULL}, "POST"},
	{"wrong method on a public route", "POST", "/health", AH_MATCH_NO_METHOD, NULL, {NULL}, "GET"},
	{"methods are case-sensitive", "get", "/agents", AH_MATCH_NO_METHOD, NULL, {NULL}, "GET, POST"},
};

static void run_case(const struct match_case *c)
{
	ah_arena *a = ah_arena_new();
	ah_req r = {.arena = a};
	const ah_route *rt = NULL;
	const char *allow = NULL;
	int m = ah_route_match(&r, tables, c->method, c->path, &rt, &allow);
	int good = m == c->want;
	if (good && m == AH_MATCH_OK) {
		size_t n = 0;
		while (n < 4 && c->p[n])
			n++;
		good = rt && rt->fn == c->fn && r.nparams == n;
		for (size_t i = 0; good && i < n; i++)
			good = strcmp(r.params[i], c->p[i]) == 0;
	}
	if (good && m == AH_MATCH_NO_METHOD)
		good = allow && strcmp(allow, c->allow) == 0;
	ok(good, "%s: %s %s", c->desc, c->method, c->path);
	if (!good)
		printf("# got %d (allow %s, nparams %zu%s%s)\n", m, allow ? allow : "-", r.nparams,
		       r.nparams ? ", first " : "", r.nparams ? r.params[0] : "");
	ah_arena_destroy(a);
}

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&cases[i]);
	/* a very long path is only a miss */
	ah_arena *a = ah_arena_new();
	ah_req r = {.arena = a};
	char *longp = ah_alloc(a, 100010);
	memcpy(longp, "/agents/", 8);
	memset(longp + 8, 'a', 100000);
	const ah_route *rt = NULL;
	const char *allow = NULL;
	ok(ah_route_match(&r, tables, "GET", longp, &rt, &allow) == AH_MATCH_OK && strlen(r.params[0]) == 100000,
	   "a 100000-character parameter");
	ah_arena_destroy(a);
	printf("1..%d\n", ntest);
	return nfail != 0;
}
