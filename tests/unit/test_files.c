/* lib/files' checks on names, tags, content types and mount paths, and the
 * Content-Disposition of downloads: one row per case. */
#include <string.h>

#include "files/files.h"
#include "tap.h"

static const struct { const char *name; size_t len; int ok; const char *what; } names[] = {
	{"report.pdf", 10, 1, "plain name"},
	{"r\xc3\xa9sum\xc3\xa9.txt", 12, 1, "UTF-8 name"},
	{"", 0, 0, "empty"},
	{"a/b", 3, 0, "slash"},
	{"a\\b", 3, 0, "backslash"},
	{"..", 2, 0, ".."},
	{".", 1, 0, "."},
	{"a\0b", 3, 0, "NUL inside"},
	{"a\x01" "b", 3, 0, "control character"},
	{"a\x7f", 2, 0, "DEL"},
	{"\xff\xfe", 2, 0, "not UTF-8"},
	{"...", 3, 1, "three dots are a name"},
	{"invoice\xe2\x80\xae" "fdp.exe", 17, 0, "U+202E RLO (shows as invoiceexe.pdf)"},
	{"\xe2\x80\xaa" "a", 4, 0, "U+202A LRE first"},
	{"a\xe2\x80\xac", 4, 0, "U+202C PDF last"},
	{"a\xe2\x81\xa6" "b", 5, 0, "U+2066 LRI"},
	{"a\xe2\x81\xa9" "b", 5, 0, "U+2069 PDI"},
	{"a\xe2\x80\xa9" "b", 5, 1, "U+2029 is no bidi control"},
	{"a\xe2\x80\xaf" "b", 5, 1, "U+202F narrow no-break space is a name"},
	{"a\xe2\x81\xa5" "b", 5, 1, "U+2065 (unassigned, beside LRI) is a name"},
	{"\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d.txt", 12, 1, "Hebrew name (right-to-left by itself)"},
};

static const struct { const char *ct; int ok; } types[] = {
	{"text/plain", 1}, {"application/vnd.api+json", 1}, {"text/plain; charset=utf-8", 1},
	{"text", 0}, {"/plain", 0}, {"text/", 0}, {"text/plain\r\nX: y", 0}, {"t\xc3\xa9xt/plain", 0},
	{"", 0},
};

static const struct { const char *csv, *norm; } tags[] = {
	{"", ""}, {"b,a", ",a,,b,"}, {" a , b ", ",a,,b,"}, {"a,a", ",a,"},
	{"a,,b", NULL}, {"a,", NULL}, {",a", NULL}, {"50%", NULL}, {"a_b", NULL},
	{"q4,\xe2\x80\xae" "lanif", NULL}, {"x\xe2\x81\xa7", NULL},
};

static const struct { const char *path, *norm; } mounts[] = {
	{"/files/agent/x.txt", "/files/agent/x.txt"}, {"/files/agent/d/x.txt", "/files/agent/d/x.txt"},
	{"/files/agent/", NULL}, {"/files/agent/../x", NULL}, {"/files/agent/./x", NULL},
	{"/files/agent/a//b", NULL}, {"/files/agent/d/", NULL}, {"/files/session/x", NULL},
	{"/etc/passwd", NULL}, {"files/agent/x", NULL},
	{"/files/agent/d\xe2\x80\xae/x", NULL}, {"/files/agent/x\xe2\x81\xa8.txt", NULL},
};

int main(void)
{
	ah_arena *a = ah_arena_new();
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		ok((ah_filename_problem(names[i].name, names[i].len) == NULL) == names[i].ok, "filename: %s", names[i].what);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		ok((ah_content_type_problem(types[i].ct) == NULL) == types[i].ok, "content type %zu", i);
	for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++) {
		char *norm = NULL;
		const char *why = ah_tags_parse(a, tags[i].csv, &norm);
		ok(tags[i].norm ? !why && strcmp(norm, tags[i].norm) == 0 : why != NULL, "tags '%s'", tags[i].csv);
	}
	for (size_t i = 0; i < sizeof(mounts) / sizeof(mounts[0]); i++) {
		char *norm = NULL;
		const char *why = ah_mount_path_problem(a, mounts[i].path, &norm);
		ok(mounts[i].norm ? !why && strcmp(norm, mounts[i].norm) == 0 : why != NULL, "mount path '%s'",
		   mounts[i].path);
	}
	ok(strcmp(ah_content_disposition(a, "a b.txt"), "attachment; filename=\"a b.txt\"") == 0,
	   "ASCII name: quoted filename only");
	ok(strcmp(ah_content_disposition(a, "\xe2\x82\xac \"q\".txt"),
	          "attachment; filename=\"___ _q_.txt\"; filename*=UTF-8''%E2%82%AC%20%22q%22.txt") == 0,
	   "non-ASCII name: ASCII fallback and RFC 5987 filename*");
	ah_arena_destroy(a);
	return tap_done();
}
