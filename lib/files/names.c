/* What a file's name, tags, content type and mount path may be, and the
 * Content-Disposition of a download. Names and tags are shown (to the user, to
 * whoever a file is handed to, in a save dialog): none may hide or reorder
 * what it shows, hence no control and no bidirectional control character. */
#include "files/files.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

/* U+202A..U+202E (LRE, RLE, PDF, LRO, RLO) and U+2066..U+2069 (LRI, RLI, FSI,
 * PDI) reorder what follows them on screen: "invoice<RLO>fdp.exe" shows as
 * "invoiceexe.pdf" in a listing, the dashboard, a browser's save dialog and a
 * terminal. str is valid UTF-8, so an 0xE2 is always a sequence's first byte. */
static bool has_bidi_control(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	for (size_t i = 0; i + 2 < n; i++)
		if (s[i] == 0xE2 && ((s[i + 1] == 0x80 && s[i + 2] >= 0xAA && s[i + 2] <= 0xAE) ||
		                     (s[i + 1] == 0x81 && s[i + 2] >= 0xA6 && s[i + 2] <= 0xA9)))
			return true;
	return false;
}

const char *ah_filename_problem(const char *name, size_t len)
{
	if (len == 0)
		return "Filename must not be empty";
	if (len > AH_FILENAME_MAX)
		return "Filename should have at most 255 bytes";
	if (!ah_utf8_valid(name, len))
		return "Filename must be valid UTF-8";
	if (has_bidi_control(name, len))
		return "Filename must not contain bidirectional control characters (U+202A..U+202E, "
		       "U+2066..U+2069)";
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c == '/' || c == '\\')
			return "Filename must not contain '/' or '\\'";
		if (c < 0x20 || c == 0x7f)
			return "Filename must not contain NUL or control characters";
	}
	/* A name is a path segment in sandboxes (/files/agent/<filename>). */
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return "Filename must not be '.' or '..'";
	return NULL;
}

/* RFC 9110 token characters. */
static bool tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

const char *ah_content_type_problem(const char *ct)
{
	size_t n = strlen(ct), i = 0;
	if (n == 0 || n > 255)
		return "Content type should have 1 to 255 characters";
	while (i < n && tchar(ct[i]))
		i++;
	if (i == 0 || ct[i] != '/')
		return "Content type must be a media type such as text/plain";
	size_t sub = ++i;
	while (i < n && tchar(ct[i]))
		i++;
	if (i == sub)
		return "Content type must be a media type such as text/plain";
	/* Parameters: printable ASCII only (this is a response header later). */
	if (i < n && ct[i] != ';' && ct[i] != ' ')
		return "Content type must be a media type such as text/plain";
	for (; i < n; i++)
		if ((unsigned char)ct[i] < 0x20 || (unsigned char)ct[i] >= 0x7f)
			return "Content type must be printable ASCII";
	return NULL;
}

static const char *tag_problem(const char *t, size_t n)
{
	if (n == 0)
		return "Tags must not be empty";
	if (!ah_utf8_valid(t, n))
		return "Tags must be valid UTF-8";
	if (has_bidi_control(t, n))
		return "Tags must not contain bidirectional control characters (U+202A..U+202E, "
		       "U+2066..U+2069)";
	size_t chars = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)t[i];
		if (c < 0x20 || c == 0x7f)
			return "Tags must not contain control characters";
		/* LIKE's own characters would make a filter match more than asked. */
		if (c == '%' || c == '_' || c == '\\')
			return "Tags must not contain '%', '_' or '\\'";
		chars += (c & 0xC0) != 0x80;
	}
	return chars > AH_TAG_MAX ? "Tags should have at most 64 characters" : NULL;
}

static size_t put_tag(char *o, const char *t)
{
	size_t n = strlen(t);
	o[0] = ',';
	memcpy(o + 1, t, n);
	o[n + 1] = ',';
	return n + 2;
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

const char *ah_tags_parse(ah_arena *a, const char *csv, char **out)
{
	char *tags[AH_TAGS_MAX + 1];
	size_t count = 0, total = 1;
	for (const char *p = csv; p && *p;) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		const char *t = p;
		while (n && (*t == ' ' || *t == '\t'))
			t++, n--;
		while (n && (t[n - 1] == ' ' || t[n - 1] == '\t'))
			n--;
		const char *why = tag_problem(t, n);
		if (why)
			return why;
		if (count == AH_TAGS_MAX)
			return "At most 20 tags";
		tags[count++] = ah_strndup(a, t, n);
		total += n + 2;
		p = e ? e + 1 : p + strlen(p);
		if (e && !*p)
			return "Tags must not be empty";
	}
	/* Sorted and each wrapped in commas (",a,,b,"): a sorted subset is then
	 * one LIKE pattern, '%,a,%,b,%' (files.c's tag filter). */
	qsort(tags, count, sizeof(tags[0]), by_str);
	char *norm = ah_alloc(a, total), *o = norm;
	for (size_t i = 0; i < count; i++) {
		if (i && strcmp(tags[i], tags[i - 1]) == 0)
			continue;
		o += put_tag(o, tags[i]);
	}
	*o = '\0';
	*out = norm;
	return NULL;
}

void ah_tags_each(const char *norm, void (*fn)(void *ud, const char *tag, size_t n), void *ud)
{
	for (const char *p = norm && *norm == ',' ? norm + 1 : norm; p && *p;) {
		const char *e = strchr(p, ',');
		if (!e)
			break;
		if (e > p)
			fn(ud, p, (size_t)(e - p));
		p = e + 1;
	}
}

char *ah_content_disposition(ah_arena *a, const char *filename)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(filename);
	char *ascii = ah_alloc(a, n + 1), *ext = ah_alloc(a, n * 3 + 1);
	bool plain = true;
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)filename[i];
		/* The quoted fallback: printable ASCII without '"' and '\' (RFC 6266 4.1). */
		bool ok = c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
		ascii[i] = ok ? (char)c : '_';
		plain &= ok;
		/* attr-char of RFC 5987 stays, everything else is %XX of its UTF-8 bytes. */
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    (c && strchr("!#$&+-.^_`|~", c))) {
			ext[o++] = (char)c;
		} else {
			ext[o++] = '%';
			ext[o++] = hex[c >> 4];
			ext[o++] = hex[c & 15];
		}
	}
	if (plain)
		return ah_sprintf(a, "attachment; filename=\"%s\"", filename);
	return ah_sprintf(a, "attachment; filename=\"%s\"; filename*=UTF-8''%s", ascii, ext);
}

const char *ah_mount_path_problem(ah_arena *a, const char *path, char **normalised)
{
	size_t root = strlen(AH_MOUNT_ROOT);
	if (strncmp(path, AH_MOUNT_ROOT, root) != 0)
		return "mount_path must be under /files/agent/";
	if (strlen(path) > 1024)
		return "mount_path should have at most 1024 characters";
	char *out = ah_strdup(a, path);
	/* Each segment a valid file name: no "", ".", "..", NUL or control characters. */
	for (const char *p = path + root; *p;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (ah_filename_problem(p, n))
			return "mount_path must be a normalised path under /files/agent/ naming a file";
		p = e ? e + 1 : p + n;
		if (e && !*p)
			return "mount_path must name a file, not a directory";
	}
	if (!path[root])
		return "mount_path must name a file under /files/agent/";
	*normalised = out;
	return NULL;
}
