/* Unit test of lib/deploy's tarball extraction, printed as TAP. Each row builds
 * a small .tar.gz with libarchive, extracts it into a fresh directory and checks
 * the outcome: extracted (and where the project root is), or refused with the
 * exact status_message. */
#include "deploy/deploy.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct entry {
	const char *name;
	char kind;        /* f file, d dir, l symlink, h hardlink, c char device, p fifo,
	                   * s sparse file: 1 GiB apparent size, data = its only bytes */
	const char *data; /* file content or link target */
};

struct tcase {
	const char *desc;
	struct entry e[6];
	const char *msg;  /* NULL: must extract; else refused with it (AH_EINVALID, or
	                   * AH_ETOOBIG when it says "too large") */
	const char *root; /* expected project root below the destination ("" = itself) */
};

#define MANI {"agent.json", 'f', "{}"}
static const struct tcase cases[] = {
	{"flat project", {MANI, {"index.js", 'f', "x"}}, NULL, ""},
	{"./ prefixed entries", {{"./", 'd', NULL}, {"./agent.json", 'f', "{}"}}, NULL, ""},
	{"one wrapping directory", {{"p/", 'd', NULL}, {"p/agent.json", 'f', "{}"}}, NULL, "/p"},
	{"links inside the tree", {MANI, {"lib/a.js", 'f', "x"}, {"l", 'l', "lib/a.js"},
	                           {"lib/up", 'l', "../agent.json"}, {"h", 'h', "lib/a.js"}}, NULL, ""},
	{"dotdot entry", {MANI, {"../x", 'f', "x"}}, "Invalid tarball: entry \"../x\" has a \"..\" component", NULL},
	{"inner dotdot entry", {MANI, {"a/../../x", 'f', "x"}},
	 "Invalid tarball: entry \"a/../../x\" has a \"..\" component", NULL},
	{"absolute entry", {MANI, {"/etc/x", 'f', "x"}}, "Invalid tarball: entry \"/etc/x\" has an absolute path", NULL},
	{"symlink out", {MANI, {"l", 'l', "../x"}}, "Invalid tarball: symlink \"l\" points outside the project (\"../x\")", NULL},
	{"absolute symlink", {MANI, {"l", 'l', "/etc"}}, "Invalid tarball: symlink \"l\" points outside the project (\"/etc\")", NULL},
	{"symlink chain out", {MANI, {"a", 'l', "."}, {"b", 'l', "a/.."}},
	 "Invalid tarball: symlink \"b\" points outside the project", NULL},
	{"write through a symlink", {MANI, {"d", 'l', "."}, {"d/x", 'f', "x"}},
	 "Invalid tarball: entry \"d/x\" passes through a symbolic link or a file", NULL},
	{"hard link out", {MANI, {"h", 'h', "../etc/passwd"}},
	 "Invalid tarball: hard link \"h\" points outside the project (\"../etc/passwd\")", NULL},
	{"character device", {MANI, {"null", 'c', NULL}}, "Invalid tarball: entry \"null\" is a device file", NULL},
	{"fifo", {MANI, {"p", 'p', NULL}}, "Invalid tarball: entry \"p\" is a fifo", NULL},
	{"sparse file over the limit", {MANI, {"big", 's', "x"}},
	 "Code archive is too large: more than 500 MB when extracted", NULL},
};

static int write_tarball(const char *path, const struct entry *e)
{
	struct archive *a = archive_write_new();
	archive_write_add_filter_gzip(a);
	archive_write_set_format_pax(a); /* pax: sparse entries too */
	if (archive_write_open_filename(a, path) != ARCHIVE_OK)
		return -1;
	for (; e->name; e++) {
		struct archive_entry *ae = archive_entry_new();
		archive_entry_set_pathname(ae, e->name);
		archive_entry_set_perm(ae, 0644);
		size_t len = e->kind == 'f' ? strlen(e->data) : 0;
		switch (e->kind) {
		case 'f': archive_entry_set_filetype(ae, AE_IFREG); archive_entry_set_size(ae, (la_int64_t)len); break;
		case 'd': archive_entry_set_filetype(ae, AE_IFDIR); break;
		case 'l': archive_entry_set_filetype(ae, AE_IFLNK); archive_entry_set_symlink(ae, e->data); break;
		case 'h': archive_entry_set_filetype(ae, AE_IFREG); archive_entry_set_hardlink(ae, e->data); break;
		case 'c': archive_entry_set_filetype(ae, AE_IFCHR); archive_entry_set_rdev(ae, 259); break;
		case 'p': archive_entry_set_filetype(ae, AE_IFIFO); break;
		case 's':
			archive_entry_set_filetype(ae, AE_IFREG);
			archive_entry_set_size(ae, 1LL << 30);
			archive_entry_sparse_add_entry(ae, 0, (la_int64_t)strlen(e->data));
			len = strlen(e->data);
			break;
		}
		archive_write_header(a, ae);
		if (len)
			archive_write_data(a, e->data, len);
		archive_entry_free(ae);
	}
	archive_write_close(a);
	archive_write_free(a);
	return 0;
}

int main(void)
{
	size_t n = sizeof(cases) / sizeof(cases[0]);
	int failed = 0;
	char tmpl[] = "/tmp/ah-test-tarball-XXXXXX";
	const char *base = mkdtemp(tmpl);
	if (!base)
		return 1;
	printf("1..%zu\n", n);
	for (size_t i = 0; i < n; i++) {
		char tgz[300], dest[300], root[600], want[600];
		ah_err err = {0};
		struct ah_tar_limits lim = AH_TAR_LIMITS_DEFAULT;
		snprintf(tgz, sizeof(tgz), "%s/%zu.tar.gz", base, i);
		snprintf(dest, sizeof(dest), "%s/%zu", base, i);
		mkdir(dest, 0755);
		int rc = write_tarball(tgz, cases[i].e);
		if (rc == 0)
			rc = ah_tarball_extract(tgz, dest, &lim, &err);
		int good;
		if (cases[i].msg) {
			int want_rc = strstr(cases[i].msg, "too large") ? AH_ETOOBIG : AH_EINVALID;
			good = rc == want_rc && strcmp(err.msg, cases[i].msg) == 0;
		} else {
			snprintf(want, sizeof(want), "%s%s", dest, cases[i].root);
			good = rc == 0 && ah_tarball_project_root(root, sizeof(root), dest, &err) == 0 &&
			       strcmp(root, want) == 0;
		}
		failed += !good;
		printf("%s %zu - %s%s%s\n", good ? "ok" : "not ok", i + 1, cases[i].desc,
		       good ? "" : ": ", good ? "" : err.msg);
	}
	ah_deploy_rmtree(base);
	return failed ? 1 : 0;
}
