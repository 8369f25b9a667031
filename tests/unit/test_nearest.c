/* Unit test of core/nearest.h's edit distance, as TAP. */
#include "core/nearest.h"

#include <string.h>

#include "tap.h"

static const struct { const char *a, *b; size_t want; } cases[] = {
	{"", "", 0}, {"force", "force", 0}, {"force", "forse", 1}, {"force", "forc", 1}, {"force", "xforce", 1},
	{"description", "descrption", 1}, {"kitten", "sitting", 3}, {"", "abc", 3}, {"limit", "offset", 5},
	{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "a", 64},  /* too long */
};

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t d = ah_edit_distance(cases[i].a, cases[i].b), back = ah_edit_distance(cases[i].b, cases[i].a);
		ok(d == cases[i].want && back == d, "distance(\"%.12s\", \"%s\") is %zu both ways (got %zu, %zu)",
		   cases[i].a, cases[i].b, cases[i].want, d, back);
	}
	return tap_done();
}
