/* Input validators: see validate.h. */
#include "validate.h"

#include <string.h>

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
	char *s = ah_slug_from_name(a, name, max);
	return *s ? s : ah_strdup(a, "agent");
}

/* Top-level directories of the sandbox's own root (lib/sandbox/mounts.c) and
 * those the service owns: a bucket there would hide or replace them. */
static const char *const MOUNT_RESERVED[] = {
	"/proc", "/sys", "/dev", "/app", "/files", "/usr", "/etc", "/bin", "/sbin", "/lib",
	"/lib32", "/lib64", "/libx32", "/.sbx", NULL,
};

const char *ah_bucket_mount_path_problem(const char *p)
{
	if (p[0] != '/')
		return "Path should be absolute (start with '/')";
	if (p[1] == '\0')
		return "Path should not be '/'";
	for (const char *c = p; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f || *c == '\\' || *c == ',' || *c == ':')
			return "Path should not contain control characters, '\\', ',' or ':'";
	if (strstr(p, "//") || p[strlen(p) - 1] == '/')
		return "Path should be normalised: no '//' and no trailing '/'";
	for (const char *seg = p + 1; seg; seg = strchr(seg, '/') ? strchr(seg, '/') + 1 : NULL) {
		size_t n = strcspn(seg, "/");
		if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return "Path should be normalised: no '.' or '..' segments";
	}
	for (size_t i = 0; MOUNT_RESERVED[i]; i++)
		if (ah_path_within(p, MOUNT_RESERVED[i]))
			return ah_mount_reserved_message;
	/* Below /tmp is fine (made on the sandbox's own disk); /tmp itself would hide it. */
	if (strcmp(p, "/tmp") == 0)
		return ah_mount_reserved_message;
	return NULL;
}

const char *const ah_mount_reserved_message =
	"Path should not be under /proc, /sys, /dev, /app, /files or the sandbox's system "
	"directories (/usr, /etc, /bin, /sbin, /lib*), nor /tmp itself";

bool ah_path_within(const char *p, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(p, dir, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

const char *ah_source_prefix_problem(const char *p)
{
	if (p[0] == '/')
		return "Prefix should be relative to the bucket (no leading '/')";
	for (const char *c = p; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f || *c == '\\')
			return "Prefix should not contain control characters or '\\'";
	if (strstr(p, "//"))
		return "Prefix should not contain '//'";
	for (const char *seg = p; seg; seg = strchr(seg, '/') ? strchr(seg, '/') + 1 : NULL) {
		size_t n = strcspn(seg, "/");
		if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return "Prefix should not contain '.' or '..' segments";
	}
	return NULL;
}
