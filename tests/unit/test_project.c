/* Unit test of core/project.h, the agent project's names that the client and
 * the service share, as TAP: the slug rule, the slug derived from a name (the
 * client's and the server's derivations were two copies; these rows hold both
 * of their tests' cases), and the manifest's file names in their order. */
#include "core/project.h"

#include <string.h>

#include "tap.h"

static const struct { const char *s; bool valid; } rules[] = {
	{"a", true}, {"my-agent-2", true}, {"0", true}, {"", false}, {"-a", false}, {"a-", false},
	{"a--b", false}, {"A", false}, {"a_b", false}, {"caf\xc3\xa9", false},
	{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", true},    /* 63 */
	{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},   /* 64 */
};

static const struct { const char *name; size_t max; const char *want; } derived[] = {
	{"Hello agent", 63, "hello-agent"}, {"  My  Agent!! v2 ", 63, "my-agent-v2"}, {"ÄÖÜ x", 63, "x"},
	{"a--b__c", 63, "a-b-c"}, {"!!!", 63, ""}, {"", 63, ""}, {"UPPER", 63, "upper"},
	{"Caf\xc3\xa9 42", 63, "caf-42"}, {"abcdef", 3, "abc"}, {"ab cd", 3, "ab"}, {"x-2", 61, "x-2"},
	/* 62 letters, a space, more: cut at 63 is a '-', trimmed to 62. */
	{"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb cc", 63,
	 "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"},
};

int main(void)
{
	ah_arena *a = ah_arena_new();
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		ok(ah_slug_valid(rules[i].s) == rules[i].valid, "slug \"%.20s\" (%zu chars) is %s", rules[i].s,
		   strlen(rules[i].s), rules[i].valid ? "valid" : "refused");
	for (size_t i = 0; i < sizeof(derived) / sizeof(derived[0]); i++) {
		const char *s = ah_slug_from_name(a, derived[i].name, derived[i].max);
		ok(!strcmp(s, derived[i].want) && (!*s || ah_slug_valid(s)),
		   "slug of \"%.20s\" (max %zu) is \"%.20s\" and valid (got \"%.20s\")", derived[i].name,
		   derived[i].max, derived[i].want, s);
	}
	ok(!strcmp(ah_manifest_names[0], "agent.json") && !strcmp(ah_manifest_names[1], "castari.json") &&
	   !ah_manifest_names[2], "the manifest is agent.json, else castari.json");
	for (size_t i = 0; ah_manifest_names[i]; i++)
		ok(strlen(ah_manifest_names[i]) < AH_MANIFEST_NAME_CAP, "%s fits AH_MANIFEST_NAME_CAP",
		   ah_manifest_names[i]);
	ah_arena_destroy(a);
	return tap_done();
}
