/* Unit test of lib/deploy's pure checks, printed as TAP: semver, tarball entry
 * paths, symlink targets, and manifest validation with its exact messages (the
 * messages are the agent's status_message, i.e. part of the contract). */
#include "deploy/deploy.h"

#include <stdio.h>
#include <string.h>

#include "tap.h"

static const struct { const char *v; int valid; } semver[] = {
	{"1.0.0", 1}, {"0.0.0", 1}, {"10.20.30", 1}, {"1.0.0-alpha", 1},
	{"1.0.0-alpha.1", 1}, {"1.0.0-0.3.7", 1}, {"1.0.0-x.7.z.92", 1},
	{"1.0.0+20130313144700", 1}, {"1.0.0-beta+exp.sha.5114f85", 1},
	{"1.0.0+21AF26D3----117B344092BD", 1}, {"1.0.0-rc.1+build.01", 1},
	{"1.0", 0}, {"1", 0}, {"", 0}, {"v1.0.0", 0}, {"01.0.0", 0}, {"1.02.0", 0},
	{"1.0.0-", 0}, {"1.0.0+", 0}, {"1.0.0-01", 0}, {"1.0.0-a..b", 0},
	{"1.0.0 ", 0}, {"1.0.0.0", 0}, {"1.0.0-a_b", 0}, {"a.b.c", 0},
};

static const struct { const char *p; int valid; } paths[] = {
	{"index.js", 1}, {"src/index.js", 1}, {"./index.js", 1}, {"a//b", 1}, {"..a/b", 1},
	{"a/..b", 1}, {"", 0}, {"/etc/passwd", 0}, {"..", 0}, {"../x", 0}, {"a/../b", 0},
	{"a/..", 0}, {"./../x", 0},
};

static const struct { const char *link, *target; int valid; } links[] = {
	{"lib", "real.js", 1}, {"a/b/l", "../c", 1}, {"a/b/l", "../../c", 1},
	{"a/l", "./x/../y", 1}, {"l", ".", 1},
	{"l", "../x", 0}, {"a/b/l", "../../../x", 0}, {"l", "/etc/passwd", 0},
	{"l", "", 0}, {"a/l", "x/../../../y", 0}, {"../l", "x", 0},
};

#define V "\"version\":\"1.0.0\""
#define E "\"entrypoint\":\"index.js\""
#define R "\"runtime\":\"node\""
static const struct { const char *desc, *json, *msg; } manifests[] = {
	{"valid", "{\"name\":\"x\"," V "," E "," R "}", NULL},
	{"valid with slug and extras", "{\"name\":\"x\",\"slug\":\"my-agent\",\"extra\":1," V "," E "," R "}", NULL},
	{"not JSON", "{\"name\":", "Invalid manifest agent.json: not valid JSON (unexpected end of input)"},
	{"trailing garbage", "{} x", "Invalid manifest agent.json: not valid JSON (trailing characters after the value)"},
	{"array", "[]", "Invalid manifest agent.json: must be a JSON object"},
	{"name missing", "{" V "," E "," R "}", "Invalid manifest agent.json: \"name\" is required"},
	{"name not string", "{\"name\":1," V "," E "," R "}", "Invalid manifest agent.json: \"name\" must be a string"},
	{"name empty", "{\"name\":\"\"," V "," E "," R "}", "Invalid manifest agent.json: \"name\" must not be empty"},
	{"bad slug", "{\"name\":\"x\",\"slug\":\"Bad Slug\"," V "," E "," R "}",
	 "Invalid manifest agent.json: \"slug\" must match ^[a-z0-9]+(-[a-z0-9]+)*$ (got \"Bad Slug\")"},
	{"version missing", "{\"name\":\"x\"," E "," R "}", "Invalid manifest agent.json: \"version\" is required"},
	{"version not semver", "{\"name\":\"x\",\"version\":\"1.0\"," E "," R "}",
	 "Invalid manifest agent.json: \"version\" must be semver (got \"1.0\")"},
	{"version a number", "{\"name\":\"x\",\"version\":1," E "," R "}",
	 "Invalid manifest agent.json: \"version\" must be a string"},
	{"entrypoint missing", "{\"name\":\"x\"," V "," R "}", "Invalid manifest agent.json: \"entrypoint\" is required"},
	{"entrypoint absolute", "{\"name\":\"x\"," V ",\"entrypoint\":\"/etc/passwd\"," R "}",
	 "Invalid manifest agent.json: \"entrypoint\" must be a relative path inside the project (got \"/etc/passwd\")"},
	{"entrypoint with ..", "{\"name\":\"x\"," V ",\"entrypoint\":\"../x.js\"," R "}",
	 "Invalid manifest agent.json: \"entrypoint\" must be a relative path inside the project (got \"../x.js\")"},
	{"runtime missing", "{\"name\":\"x\"," V "," E "}", "Invalid manifest agent.json: \"runtime\" is required"},
	{"runtime python", "{\"name\":\"x\"," V "," E ",\"runtime\":\"python\"}",
	 "Invalid manifest agent.json: \"runtime\" must be \"node\" (got \"python\")"},
};

int main(void)
{
	size_t ns = sizeof(semver) / sizeof(semver[0]), np = sizeof(paths) / sizeof(paths[0]);
	size_t nl = sizeof(links) / sizeof(links[0]), nm = sizeof(manifests) / sizeof(manifests[0]);
	printf("1..%zu\n", ns + np + nl + nm);
	for (size_t i = 0; i < ns; i++)
		ok(ah_semver_valid(semver[i].v) == semver[i].valid, "semver \"%s\" %s", semver[i].v,
		   semver[i].valid ? "accepted" : "refused");
	for (size_t i = 0; i < np; i++)
		ok((ah_deploy_path_check(paths[i].p) == 0) == paths[i].valid, "path \"%s\" %s",
		   paths[i].p, paths[i].valid ? "accepted" : "refused");
	for (size_t i = 0; i < nl; i++)
		ok((ah_deploy_link_check(links[i].link, links[i].target) == 0) == links[i].valid,
		   "symlink %s -> \"%s\" checked", links[i].link, links[i].target);
	for (size_t i = 0; i < nm; i++) {
		struct ah_manifest m;
		ah_err err = {0};
		int rc = ah_manifest_parse(&m, "agent.json", manifests[i].json, strlen(manifests[i].json), &err);
		int good = manifests[i].msg ? rc == AH_EINVALID && strcmp(err.msg, manifests[i].msg) == 0
		                            : rc == 0;
		ok(good, "manifest: %s%s", manifests[i].desc, good ? "" : err.msg);
	}
	return nfail ? 1 : 0;
}
