/* An agent project's names: see project.h. */
#include "core/project.h"

#include <string.h>

const char *const ah_manifest_names[] = {"agent.json", "castari.json", NULL};

static bool slug_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool ah_slug_valid(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > AH_SLUG_MAX || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!slug_char(s[i]) && !(s[i] == '-' && s[i + 1] != '-'))
			return false;
	return true;
}

char *ah_slug_from_name(ah_arena *a, const char *name, size_t max)
{
	char *s = ah_alloc(a, strlen(name) + 1);
	size_t n = 0;
	for (const char *p = name; *p; p++) {
		/* By hand, not tolower(): the locale must not decide what a slug is. */
		char c = *p >= 'A' && *p <= 'Z' ? (char)(*p - 'A' + 'a') : *p;
		if (slug_char(c))
			s[n++] = c;
		else if (n > 0 && s[n - 1] != '-')
			s[n++] = '-';
	}
	if (n > max)
		n = max;
	while (n > 0 && s[n - 1] == '-')
		n--;
	s[n] = '\0';
	return s;
}
