/* Input validators: see validate.h. */
#include "validate.h"

#include <ctype.h>
#include <string.h>

bool ah_slug_valid(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		bool alnum = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9');
		if (!alnum && !(s[i] == '-' && s[i + 1] != '-'))
			return false;
	}
	return true;
}

/* The runner decides which hosts may be reached; this only rejects what is
 * not a URL. */
bool ah_repo_url_valid(const char *u)
{
	static const char *const schemes[] = {"https://", "http://", "ssh://", "git://", NULL};
	for (const char *p = u; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return false;
	for (size_t i = 0; schemes[i]; i++)
		if (strncmp(u, schemes[i], strlen(schemes[i])) == 0)
			return strlen(u) > strlen(schemes[i]) + 1;
	const char *at = strchr(u, '@'), *colon = strchr(u, ':');
	return at && colon && at < colon && colon[1] != '\0' && !strstr(u, "://");
}

/* git check-ref-format, in brief: what could never name a branch or tag. */
bool ah_branch_valid(const char *b)
{
	if (!*b || b[0] == '-' || b[0] == '/' || strstr(b, "..") || strstr(b, "@{") ||
	    strstr(b, "//") || b[strlen(b) - 1] == '/' || b[strlen(b) - 1] == '.')
		return false;
	for (const char *p = b; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f || strchr("~^:?*[\\", *p))
			return false;
	return true;
}

bool ah_session_id_valid(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 128)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || strchr("._:-", s[i])))
			return false;
	return true;
}

char *ah_slugify(ah_arena *a, const char *name, size_t max)
{
	char *s = ah_alloc(a, strlen(name) + 2);
	size_t n = 0;
	for (const char *p = name; *p; p++) {
		char c = (char)tolower((unsigned char)*p);
		bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (ok)
			s[n++] = c;
		else if (n > 0 && s[n - 1] != '-')
			s[n++] = '-';
	}
	if (n > max)
		n = max;
	while (n > 0 && s[n - 1] == '-')
		n--;
	s[n] = '\0';
	return n ? s : ah_strdup(a, "agent");
}
