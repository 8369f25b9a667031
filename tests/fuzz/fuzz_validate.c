/* Fuzz target: the handlers' input validators. Properties: what slugify makes
 * is always a valid slug; a valid slug or session id is printable
 * ASCII, a valid branch or repository URL has no space or control character
 * (git allows UTF-8 in both; the body parser has checked the UTF-8 before): they end
 * up in paths, log lines and command lines. */
#include "validate.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void printable_or_trap(const char *s, bool ascii)
{
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || (unsigned char)*s == 127 ||
		    (ascii && (unsigned char)*s > 127))
			__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	ah_arena *a = ah_arena_new();
	char *slug = ah_slugify(a, s, 63);
	if (!slug || !ah_slug_valid(slug))
		__builtin_trap();
	if (ah_slug_valid(s))
		printable_or_trap(s, true);
	if (ah_session_id_valid(s))
		printable_or_trap(s, true);
	if (ah_branch_valid(s))
		printable_or_trap(s, false);
	if (ah_repo_url_valid(s))
		printable_or_trap(s, false);
	ah_arena_destroy(a);
	free(s);
	return 0;
}
