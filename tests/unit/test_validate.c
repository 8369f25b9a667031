/* Unit test of handlers/validate.c: the validators of agent and invoke input,
 * which the integration tests reach only one HTTP request per case. Each table
 * row is one input and what the API must decide about it. Printed as TAP. */
#include "validate.h"

#include <stdbool.h>
#include <string.h>

#include "tap.h"

struct pred_case {
	const char *in;
	bool want;
};

static const struct pred_case repo_urls[] = {
	{"https://github.com/a/b.git", true},
	{"http://example.com/a.git", true},
	{"ssh://git@example.com/a.git", true},
	{"git://example.com/a.git", true},
	{"git@github.com:a/b.git", true},
	{"https://", false},              /* scheme alone */
	{"https://x", false},             /* scheme and one character */
	{"https://xy", true},
	{"ftp://example.com/a.git", false},
	{"example.com/a.git", false},     /* no scheme, not scp-like */
	{"git@github.com:", false},       /* scp-like without a path */
	{"github.com:a/b@x", false},      /* the ':' before the '@' */
	{"a@b:c://d", false},             /* scp-like that hides a scheme */
	{"https://example.com/a b.git", false},
	{"https://example.com/a\tb", false},
	{"https://example.com/\x7f", false},
	{"", false},
};

static const struct pred_case branches[] = {
	{"main", true},
	{"feature/x-1", true},
	{"v1.2.3", true},
	{"", false},
	{"-main", false},
	{"/main", false},
	{"main/", false},
	{"main.", false},
	{"a..b", false},
	{"a@{1}", false},
	{"a//b", false},
	{"a b", false},
	{"a~1", false},
	{"a^", false},
	{"a:b", false},
	{"a?", false},
	{"a*", false},
	{"a[b", false},
	{"a\\b", false},
	{"a\x7f", false},
};

static const struct pred_case session_ids[] = {
	{"s1", true},
	{"A.b_c:d-e", true},
	{"", false},
	{"a b", false},
	{"a/b", false},
	{"a_b", true},
	{"caf\xc3\xa9", false},
};

static const struct pred_case slugs[] = {
	{"a", true},
	{"my-agent-2", true},
	{"", false},
	{"-a", false},
	{"a-", false},
	{"a--b", false},
	{"A", false},
	{"a_b", false},
};

struct slugify_case {
	const char *name;
	size_t max;
	const char *want;
};

static const struct slugify_case slugifies[] = {
	{"My Agent", 63, "my-agent"},
	{"  Hello,   World!  ", 63, "hello-world"},
	{"already-a-slug", 63, "already-a-slug"},
	{"Caf\xc3\xa9 42", 63, "caf-42"},  /* non-ASCII letters are separators */
	{"!!!", 63, "agent"},              /* nothing left */
	{"", 63, "agent"},
	{"abcdef", 3, "abc"},
	{"ab cd", 3, "ab"},                /* cut, then trailing '-' trimmed */
	{"x-2", 61, "x-2"},
};

static void run_preds(const char *what, bool (*fn)(const char *), const struct pred_case *c,
                      size_t n)
{
	for (size_t i = 0; i < n; i++)
		ok(fn(c[i].in) == c[i].want, "%s(\"%s\") is %s", what, c[i].in,
		   c[i].want ? "true" : "false");
}

#define RUN(fn, table) run_preds(#fn, fn, table, sizeof(table) / sizeof(table[0]))

int main(void)
{
	RUN(ah_repo_url_valid, repo_urls);
	RUN(ah_branch_valid, branches);
	RUN(ah_session_id_valid, session_ids);
	RUN(ah_slug_valid, slugs);
	char id[130];
	memset(id, 'a', sizeof(id));
	id[128] = '\0';
	ok(ah_session_id_valid(id), "a session id of 128 characters is valid");
	id[128] = 'a';
	id[129] = '\0';
	ok(!ah_session_id_valid(id), "a session id of 129 characters is not");
	ah_arena *a = ah_arena_new();
	for (size_t i = 0; i < sizeof(slugifies) / sizeof(slugifies[0]); i++) {
		const struct slugify_case *c = &slugifies[i];
		const char *got = ah_slugify(a, c->name, c->max);
		ok(strcmp(got, c->want) == 0, "slugify(\"%s\", %zu) is \"%s\" (got \"%s\")", c->name,
		   c->max, c->want, got);
	}
	ah_arena_destroy(a);
	return tap_done();
}
