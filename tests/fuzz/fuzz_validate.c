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

/* An accepted bucket mount path is absolute, normalised, outside what the
 * sandbox itself owns, and free of what mount options or logs would split on. */
static void mount_path_ok_or_trap(const char *p)
{
	static const char *const owned[] = { "/proc", "/sys", "/dev", "/app", "/files", NULL };
	size_t n = strlen(p);
	if (p[0] != '/' || n < 2 || p[n - 1] == '/' || strstr(p, "//") || strstr(p, "/../") ||
	    strstr(p, "/./") || (n >= 3 && strcmp(p + n - 3, "/..") == 0))
		__builtin_trap();
	for (size_t i = 0; owned[i]; i++) {
		size_t k = strlen(owned[i]);
		if (strncmp(p, owned[i], k) == 0 && (p[k] == '\0' || p[k] == '/'))
			__builtin_trap();
	}
	/* Spaces and UTF-8 are fine in a path (it reaches the mount call and
	 * rclone's argv, never a shell); what would split rclone's or mount's own
	 * option syntax, or a log line, is not. */
	for (const char *c = p; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f || *c == '\\' || *c == ',' || *c == ':')
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
	if (ah_bucket_mount_path_problem(s) == NULL)
		mount_path_ok_or_trap(s);
	ah_arena_destroy(a);
	free(s);
	return 0;
}
