/* Fuzz target: the managed files' names (lib/files/names.c): filenames,
 * content types, tags, the Content-Disposition header made from a filename,
 * and attachment mount paths. Input: one byte to choose, then the string.
 * Properties: a Content-Disposition has no control byte and no bare quote
 * (it goes into a response header); a normalised mount path stays under
 * /files/agent/ with no "..", "//" or trailing "/"; parsed tags are
 * ",a,,b," shaped (each tag in commas), sorted, with no empty or repeated tag;
 * no accepted filename, tag or mount path holds a bidirectional control
 * (U+202A..U+202E, U+2066..U+2069), decoded here by code point rather than
 * matched by bytes as names.c does. */
#include "files/files.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void header_safe(const char *v)
{
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (*p < 0x20 || *p == 0x7f || *p >= 0x80)
			__builtin_trap();
}

/* Accepted text is valid UTF-8: decode each code point and trap on a bidi control. */
static void no_bidi(const char *v)
{
	for (const unsigned char *p = (const unsigned char *)v; *p;) {
		unsigned cp = *p, n = cp < 0x80 ? 0 : cp < 0xE0 ? 1 : cp < 0xF0 ? 2 : 3;
		cp &= n ? 0x3Fu >> n : 0x7Fu;
		for (unsigned k = 1; k <= n; k++)
			cp = (cp << 6) | (p[k] & 0x3Fu);
		if ((cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069))
			__builtin_trap();
		p += n + 1;
	}
}

static void mount_path(ah_arena *a, const char *s)
{
	char *norm = NULL;
	if (ah_mount_path_problem(a, s, &norm) != NULL)
		return;
	no_bidi(norm);
	if (!norm || strncmp(norm, "/files/agent/", 13) != 0 || strstr(norm, "/../") ||
	    strstr(norm, "//") || norm[strlen(norm) - 1] == '/' || strstr(norm, "/./"))
		__builtin_trap();
}

/* The normal form wraps each tag in commas (",a,,b,": files.c matches a subset
 * with one LIKE pattern): blocks of ",tag," with a non-empty tag, no comma
 * inside, sorted and without repeats. */
static void tags(ah_arena *a, const char *s)
{
	char *norm = NULL;
	if (ah_tags_parse(a, s, &norm) != NULL || !norm || !*norm)
		return;
	no_bidi(norm);
	const char *prev = NULL, *p = norm;
	size_t prev_n = 0;
	while (*p) {
		const char *e = *p == ',' ? strchr(p + 1, ',') : NULL;
		if (!e || e == p + 1)
			__builtin_trap();
		size_t n = (size_t)(e - p - 1);
		if (prev) {
			int c = memcmp(prev, p + 1, n < prev_n ? n : prev_n);
			if (c > 0 || (c == 0 && prev_n >= n))
				__builtin_trap();
		}
		prev = p + 1, prev_n = n;
		p = e + 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	char *s = malloc(size);
	if (!s)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	ah_arena *a = ah_arena_new();
	switch (data[0] % 4) {
	case 0:
		if (ah_filename_problem(s, size - 1) == NULL) {
			no_bidi(s);
			header_safe(ah_content_disposition(a, s));
		}
		break;
	case 1:
		ah_content_type_problem(s);
		break;
	case 2:
		tags(a, s);
		break;
	default:
		mount_path(a, s);
	}
	ah_arena_destroy(a);
	free(s);
	return 0;
}
