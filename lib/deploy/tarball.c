/* Safe extraction of an uploaded project tarball (gzip'd tar).
 *
 * libarchive only reads; every file is written by this module through directory
 * file descriptors opened component by component with O_NOFOLLOW, so no entry can
 * be written through a symlink, whatever order the archive puts things in. That
 * also keeps extraction free of chdir(), which a threaded runner cannot use.
 * Symlink targets are checked lexically when created, and once more after the
 * whole tree exists (ah_deploy_find_escaping_link), which catches chains of links
 * that are each harmless alone ("a" -> ".", "b" -> "a/.."). */
#include "deploy/deploy.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_CAP 4096

struct extract {
	struct archive *ar;
	int rootfd;
	const struct ah_tar_limits *lim;
	long long entries, bytes;
	ah_err *err;
};

/* What is wrong with an entry; ah_tarball_extract says once which archive. */
static int bad(ah_err *err, const char *fmt, const char *a, const char *b)
{
	char msg[1024];
	snprintf(msg, sizeof(msg), fmt, a, b ? b : "");
	return ah_err_set(err, AH_EINVALID, "%s", msg);
}

/* "Invalid tarball: <what is wrong>" (or the caller's own words for it). */
static int name_archive(int rc, const struct ah_tar_limits *lim, ah_err *err)
{
	if (rc != AH_EINVALID)
		return rc;
	char why[sizeof err->msg];
	snprintf(why, sizeof(why), "%s", err->msg);
	return ah_err_set(err, rc, "%s: %s", lim->refused ? lim->refused : "Invalid tarball", why);
}

/* Entry name without "." components and duplicate slashes; "" is the root. */
static int normalize(char *out, const char *name, ah_err *err)
{
	if (name[0] == '/')
		return bad(err, "entry \"%.200s\" has an absolute path", name, NULL);
	if (ah_deploy_path_check(name) != 0 && *name)
		return bad(err, "entry \"%.200s\" has a \"..\" component", name, NULL);
	size_t o = 0;
	for (const char *p = name; *p;) {
		const char *e = strchr(p, '/');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len > 0 && !(len == 1 && *p == '.')) {
			if (o + len + 2 >= PATH_CAP)
				return bad(err, "entry name too long", "", NULL);
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, len);
			o += len;
		}
		p = e ? e + 1 : p + len;
	}
	out[o] = '\0';
	return 0;
}

/* Opens (creating as needed) the directory that will hold rel's last component;
 * *base points at that component. Refuses to pass through a symlink. */
static int open_parent(int rootfd, char *rel, const char **base, ah_err *err)
{
	int fd = dup(rootfd);
	char *p = rel, *slash;
	while (fd >= 0 && (slash = strchr(p, '/'))) {
		*slash = '\0';
		if (mkdirat(fd, p, 0755) != 0 && errno != EEXIST)
			goto fail;
		int next = openat(fd, p, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0)
			goto fail;
		close(fd);
		fd = next;
		*slash = '/';
		p = slash + 1;
	}
	*base = p;
	return fd < 0 ? ah_err_set(err, AH_EFAIL, "dup: %s", strerror(errno)) : fd;
fail:
	*slash = '/';
	close(fd);
	if (errno == ELOOP || errno == ENOTDIR)
		return bad(err, "entry \"%.200s\" passes through a symbolic link or a file", rel, NULL);
	return ah_err_set(err, AH_EFAIL, "cannot create directories for %s: %s", rel, strerror(errno));
}

static int too_big(struct extract *x)
{
	return ah_err_set(x->err, AH_ETOOBIG, "%s is too large: more than %lld MB when extracted",
	                  x->lim->noun ? x->lim->noun : "Code archive", x->lim->max_extracted >> 20);
}

/* Sizes count as the file's apparent size, holes included: a sparse entry
 * (GNU tar --sparse) would otherwise put terabytes on the disk for a few
 * bytes of data. */
static int write_data(struct extract *x, int fd, const char *rel, long long size_declared)
{
	const void *buf;
	size_t size;
	la_int64_t off;
	int r;
	if (size_declared < 0 || size_declared > x->lim->max_extracted - x->bytes)
		return too_big(x);
	x->bytes += size_declared;
	while ((r = archive_read_data_block(x->ar, &buf, &size, &off)) == ARCHIVE_OK) {
		if (off < 0 || (long long)off + (long long)size > size_declared)
			return bad(x->err, "entry \"%.200s\" holds more data than its size", rel, NULL);
		if (pwrite(fd, buf, size, (off_t)off) != (ssize_t)size)
			return ah_err_set(x->err, AH_EFAIL, "cannot write %s: %s", rel, strerror(errno));
	}
	if (r != ARCHIVE_EOF)
		return bad(x->err, "%s", archive_error_string(x->ar), NULL);
	return 0;
}

static int make_file(struct extract *x, int dirfd, const char *base, const char *rel,
                     mode_t mode, long long size)
{
	unlinkat(dirfd, base, 0); /* a later entry replaces an earlier one, link or not */
	int fd = openat(dirfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	                (mode & 0755) | 0644);
	if (fd < 0)
		return bad(x->err, "cannot create \"%.200s\" (%s)", rel, strerror(errno));
	int rc = write_data(x, fd, rel, size);
	/* A sparse file's trailing hole has no data block to write. */
	if (rc == 0 && ftruncate(fd, (off_t)size) != 0)
		rc = ah_err_set(x->err, AH_EFAIL, "cannot size %s: %s", rel, strerror(errno));
	close(fd);
	return rc;
}

static int make_hardlink(struct extract *x, int dirfd, const char *base, const char *rel,
                         const char *target)
{
	char t[PATH_CAP];
	const char *tbase;
	if (target[0] == '/' || ah_deploy_path_check(target) != 0)
		return bad(x->err, "hard link \"%.200s\" points outside the project (\"%.200s\")", rel,
		           target);
	int rc = normalize(t, target, x->err);
	if (rc != 0 || !*t)
		return rc ? rc : bad(x->err, "hard link \"%.200s\" has an empty target", rel, NULL);
	int tdir = open_parent(x->rootfd, t, &tbase, x->err);
	if (tdir < 0)
		return tdir;
	int src = openat(tdir, tbase, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (src < 0 || fstat(src, &st) != 0 || !S_ISREG(st.st_mode))
		rc = bad(x->err, "hard link \"%.200s\" must point at a regular file in the archive "
		         "(\"%.200s\")", rel, target);
	else {
		unlinkat(dirfd, base, 0);
		if (linkat(src, "", dirfd, base, AT_EMPTY_PATH) != 0)
			rc = ah_err_set(x->err, AH_EFAIL, "cannot link %s: %s", rel, strerror(errno));
	}
	if (src >= 0)
		close(src);
	close(tdir);
	return rc;
}

static int make_entry(struct extract *x, struct archive_entry *e, char *rel)
{
	const char *base;
	const char *hard = archive_entry_hardlink(e);
	mode_t type = archive_entry_filetype(e);
	if (!hard && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
		return bad(x->err, "entry \"%.200s\" is a %s", rel,
		           type == AE_IFIFO ? "fifo" : type == AE_IFSOCK ? "socket" : "device file");
	const char *target = archive_entry_symlink(e);
	if (!hard && type == AE_IFLNK && ah_deploy_link_check(rel, target ? target : "") != 0)
		return bad(x->err, "symlink \"%.200s\" points outside the project (\"%.200s\")", rel,
		           target ? target : "");
	int dirfd = open_parent(x->rootfd, rel, &base, x->err);
	if (dirfd < 0)
		return dirfd;
	int rc = 0;
	if (hard)
		rc = make_hardlink(x, dirfd, base, rel, hard);
	else if (type == AE_IFDIR) {
		struct stat st;
		if (mkdirat(dirfd, base, 0755) != 0 &&
		    (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)))
			rc = bad(x->err, "directory \"%.200s\" clashes with another entry", rel, NULL);
	} else if (type == AE_IFLNK) {
		unlinkat(dirfd, base, 0);
		if (symlinkat(target, dirfd, base) != 0)
			rc = bad(x->err, "cannot create symlink \"%.200s\" (%s)", rel, strerror(errno));
	} else
		rc = make_file(x, dirfd, base, rel, archive_entry_perm(e), archive_entry_size(e));
	close(dirfd);
	return rc;
}

static int extract_all(struct extract *x)
{
	struct archive_entry *e;
	char rel[PATH_CAP];
	int r;
	while ((r = archive_read_next_header(x->ar, &e)) == ARCHIVE_OK) {
		if (++x->entries > x->lim->max_entries)
			return ah_err_set(x->err, AH_ETOOBIG, "Invalid tarball: more than %lld entries",
			                  x->lim->max_entries);
		const char *name = archive_entry_pathname(e);
		int rc = normalize(rel, name ? name : "", x->err);
		if (rc != 0)
			return rc;
		if (!*rel)
			continue; /* "./" itself: the root we extract into */
		if ((rc = make_entry(x, e, rel)) != 0)
			return rc;
	}
	if (r != ARCHIVE_EOF)
		return bad(x->err, "%s", archive_error_string(x->ar), NULL);
	if (x->entries == 0)
		return bad(x->err, "the archive is empty", "", NULL);
	return 0;
}

/* The second look at symlinks, once every entry exists. */
static int check_links(const char *dest, ah_err *err)
{
	char rel[PATH_CAP];
	int r = ah_deploy_find_escaping_link(rel, sizeof(rel), dest);
	if (r == 1)
		return bad(err, "symlink \"%.200s\" points outside the project", rel, NULL);
	return r == 0 ? 0 : ah_err_set(err, AH_EFAIL, "cannot walk %s: %s", dest, strerror(errno));
}

static int open_archive(struct archive **out, const char *tarball,
                        const struct ah_tar_limits *lim, ah_err *err)
{
	struct stat st;
	if (stat(tarball, &st) != 0)
		return ah_err_set(err, AH_EINVALID, "No uploaded code found for this agent");
	if (st.st_size > lim->max_compressed)
		return ah_err_set(err, AH_ETOOBIG, "%s is larger than %lld MB",
		                  lim->noun ? lim->noun : "Code archive", lim->max_compressed >> 20);
	struct archive *ar = archive_read_new();
	if (!ar)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	if (!lim->uncompressed)
		archive_read_support_filter_gzip(ar);
	if (lim->zstd_too)
		archive_read_support_filter_zstd(ar);
	archive_read_support_format_tar(ar);
	if (archive_read_open_filename(ar, tarball, 64 * 1024) != ARCHIVE_OK) {
		const char *why = archive_error_string(ar);
		if (!why || strstr(why, "Unrecognized archive format"))
			why = "not a gzip-compressed tar archive";
		int rc = name_archive(bad(err, "%s", why, NULL), lim, err);
		archive_read_free(ar);
		return rc;
	}
	*out = ar;
	return 0;
}

int ah_tarball_extract(const char *tarball, const char *dest,
                       const struct ah_tar_limits *lim, ah_err *err)
{
	struct extract x = {.lim = lim, .err = err, .rootfd = -1};
	int rc = open_archive(&x.ar, tarball, lim, err);
	if (rc != 0)
		return rc;
	/* Gzip alone is not enough: refuse a compressed non-tar before writing. */
	int filter = archive_filter_code(x.ar, 0);
	if (!lim->uncompressed && filter != ARCHIVE_FILTER_GZIP &&
	    !(lim->zstd_too && filter == ARCHIVE_FILTER_ZSTD)) {
		archive_read_free(x.ar);
		return name_archive(bad(err, "not a gzip-compressed tar archive", "", NULL), lim, err);
	}
	x.rootfd = open(dest, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (x.rootfd < 0)
		rc = ah_err_set(err, AH_EFAIL, "cannot open %s: %s", dest, strerror(errno));
	if (rc == 0)
		rc = extract_all(&x);
	if (rc == 0)
		rc = check_links(dest, err);
	if (x.rootfd >= 0)
		close(x.rootfd);
	archive_read_free(x.ar);
	return name_archive(rc, lim, err);
}

static bool has_manifest(const char *dir)
{
	char p[PATH_CAP];
	struct stat st;
	for (size_t i = 0; ah_manifest_names[i]; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, ah_manifest_names[i]);
		if (lstat(p, &st) == 0)
			return true;
	}
	return false;
}

int ah_tarball_project_root(char *out, size_t n, const char *dest, ah_err *err)
{
	snprintf(out, n, "%s", dest);
	if (has_manifest(dest))
		return 0;
	int fd = open(dest, O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return ah_err_set(err, AH_EFAIL, "cannot read %s: %s", dest, strerror(errno));
	}
	struct dirent *de;
	char only[256] = "";
	int count = 0;
	bool only_dir = false;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		count++;
		snprintf(only, sizeof(only), "%s", de->d_name);
		only_dir = de->d_type == DT_DIR;
	}
	closedir(d);
	/* One wrapping directory (`tar czf x.tgz project/`): that is the project. */
	if (count == 1 && only_dir && (size_t)snprintf(out, n, "%s/%s", dest, only) >= n)
		return ah_err_set(err, AH_EFAIL, "path too long");
	return 0;
}
