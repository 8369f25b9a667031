/* An image directory packed into a zstd-compressed tar, the form in which a deploy's
 * image is kept in the file store so that another runner can take the agent
 * over (docs/cluster.md). The reverse is ah_tarball_extract, with its checks:
 * the tar is read back as if a stranger had made it. The walk never follows a
 * symlink (they are stored as links) and skips anything but files,
 * directories and links. */
#include "deploy/deploy.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Copies the entry's bytes from the disk into the archive. */
static int copy_data(struct archive *out, const char *path, ah_err *err)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return ah_err_set(err, AH_EFAIL, "cannot open %s", path);
	char buf[65536];
	ssize_t n;
	int rc = 0;
	while (rc == 0 && (n = read(fd, buf, sizeof buf)) > 0)
		if (archive_write_data(out, buf, (size_t)n) != n)
			rc = ah_err_set(err, AH_EFAIL, "cannot write the image archive: %s",
			                archive_error_string(out));
	if (rc == 0 && n < 0)
		rc = ah_err_set(err, AH_EFAIL, "cannot read %s", path);
	close(fd);
	return rc;
}

/* One entry of the walk, named relative to the image's root. */
static int add_entry(struct archive *out, struct archive_entry *e, size_t skip, ah_err *err)
{
	const char *full = archive_entry_sourcepath(e);
	mode_t type = archive_entry_filetype(e);
	if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
		return 0;
	const char *rel = strlen(full) > skip ? full + skip : ".";
	archive_entry_set_pathname(e, rel);
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	archive_entry_set_uname(e, "root");
	archive_entry_set_gname(e, "root");
	if (archive_write_header(out, e) != ARCHIVE_OK)
		return ah_err_set(err, AH_EFAIL, "cannot write the image archive: %s",
		                  archive_error_string(out));
	return type == AE_IFREG && archive_entry_size(e) > 0 ? copy_data(out, full, err) : 0;
}

/* The entries under walk (dir itself, or dir/node_modules) into out, named
 * relative to dir; with skip_deps, dir/node_modules and what is under it
 * are left out. */
static int walk_into(struct archive *out, const char *dir, const char *walk, bool skip_deps,
                     ah_err *err)
{
	struct archive *disk = archive_read_disk_new();
	struct archive_entry *e = archive_entry_new();
	size_t skip = strlen(dir) + 1;
	char deps[4200];
	snprintf(deps, sizeof deps, "%s/node_modules", dir);
	int rc = disk && e ? 0 : ah_err_set(err, AH_EFAIL, "out of memory");
	if (rc == 0) {
		archive_read_disk_set_symlink_physical(disk);
		archive_read_disk_set_standard_lookup(disk);
		if (archive_read_disk_open(disk, walk) != ARCHIVE_OK)
			rc = ah_err_set(err, AH_EFAIL, "cannot pack %s: %s", walk, archive_error_string(disk));
	}
	for (bool first = true; rc == 0; first = false) {
		int r = archive_read_next_header2(disk, e);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK) {
			rc = ah_err_set(err, AH_EFAIL, "cannot walk %s: %s", walk, archive_error_string(disk));
			break;
		}
		bool is_deps = skip_deps && strcmp(archive_entry_sourcepath(e), deps) == 0;
		if (!is_deps)
			archive_read_disk_descend(disk);
		if (!is_deps && !(first && strcmp(walk, dir) == 0)) /* the root is the archive */
			rc = add_entry(out, e, skip, err);
	}
	archive_entry_free(e);
	archive_read_free(disk);
	return rc;
}

/* A zstd-compressed tar writer on fd (or dest when fd < 0). zstd at level 1:
 * a deploy waits for this pack, and an SDK agent's image is 450 MB, mostly a
 * native binary (gzip -1 took 8 s of CPU on the binary here, zstd -1 2.3 s
 * for the same size; older images in a store are gzip'd, which the reader
 * still takes). No padding after the frame: another may follow (below). */
static struct archive *tar_writer(int fd, const char *dest)
{
	struct archive *out = archive_write_new();
	if (!out)
		return NULL;
	archive_write_add_filter_zstd(out);
	archive_write_set_filter_option(out, "zstd", "compression-level", "1");
	archive_write_set_format_pax_restricted(out);
	archive_write_set_bytes_in_last_block(out, 1);
	if ((fd >= 0 ? archive_write_open_fd(out, fd) : archive_write_open_filename(out, dest)) !=
	    ARCHIVE_OK) {
		archive_write_free(out);
		return NULL;
	}
	return out;
}

int ah_tarball_pack(const char *dir, const char *dest, ah_err *err)
{
	struct archive *out = tar_writer(-1, dest);
	if (!out)
		return ah_err_set(err, AH_EFAIL, "cannot create %s", dest);
	int rc = walk_into(out, dir, dir, false, err);
	if (archive_write_close(out) != ARCHIVE_OK && rc == 0)
		rc = ah_err_set(err, AH_EFAIL, "cannot finish %s: %s", dest, archive_error_string(out));
	archive_write_free(out);
	return rc;
}

/* ---- an image whose node_modules was packed before ---------------------
 * A redeploy with unchanged dependencies links the previous image's
 * node_modules (reuse.c); packing those 450 MB again was most of its time.
 * So node_modules is packed on its own, as tar entries without the
 * archive's end (a zstd frame of its own, kept beside the image as
 * <image>.deps.tzst and linked to the next image with the tree), and the
 * image's archive is that part followed by a frame with the other entries
 * and the end: one tar stream in two zstd frames, which any reader of a
 * zstd'd tar takes as one. */

struct part {
	struct archive *z; /* raw format, zstd: the frame */
	unsigned char hold[1024]; /* the tar end (two zero blocks) is never passed on */
	size_t held;
	bool failed;
};

static la_ssize_t part_write(struct archive *a, void *ctx, const void *buf, size_t n)
{
	(void)a;
	struct part *p = ctx;
	const unsigned char *b = buf;
	size_t total = p->held + n;
	if (total <= sizeof p->hold) {
		memcpy(p->hold + p->held, b, n);
		p->held += n;
		return (la_ssize_t)n;
	}
	size_t emit = total - sizeof p->hold, from_hold = emit < p->held ? emit : p->held;
	if (archive_write_data(p->z, p->hold, from_hold) != (la_ssize_t)from_hold ||
	    archive_write_data(p->z, b, emit - from_hold) != (la_ssize_t)(emit - from_hold))
		p->failed = true;
	memmove(p->hold, p->hold + from_hold, p->held - from_hold);
	p->held -= from_hold;
	memcpy(p->hold + p->held, b + (emit - from_hold), n - (emit - from_hold));
	p->held += n - (emit - from_hold);
	return (la_ssize_t)n;
}

static int write_deps_part(const char *dir, const char *part_path, ah_err *err)
{
	char tmp[4200], deps[4200];
	snprintf(tmp, sizeof tmp, "%s.tmp", part_path);
	snprintf(deps, sizeof deps, "%s/node_modules", dir);
	struct part p = {.z = archive_write_new()};
	struct archive *tar = archive_write_new();
	struct archive_entry *raw = archive_entry_new();
	int rc = p.z && tar && raw ? 0 : ah_err_set(err, AH_EFAIL, "out of memory");
	if (rc == 0) {
		archive_write_add_filter_zstd(p.z);
		archive_write_set_filter_option(p.z, "zstd", "compression-level", "1");
		archive_write_set_format_raw(p.z);
		archive_write_set_bytes_in_last_block(p.z, 1);
		archive_entry_set_filetype(raw, AE_IFREG);
		archive_entry_set_pathname(raw, "deps");
		archive_write_set_format_pax_restricted(tar);
		archive_write_set_bytes_per_block(tar, 0); /* no padding: the end is the last 1024 */
		if (archive_write_open_filename(p.z, tmp) != ARCHIVE_OK ||
		    archive_write_header(p.z, raw) != ARCHIVE_OK ||
		    archive_write_open(tar, &p, NULL, part_write, NULL) != ARCHIVE_OK)
			rc = ah_err_set(err, AH_EFAIL, "cannot create %s", tmp);
	}
	if (rc == 0)
		rc = walk_into(tar, dir, deps, false, err);
	static const unsigned char zeros[1024];
	if (tar && archive_write_close(tar) != ARCHIVE_OK && rc == 0)
		rc = ah_err_set(err, AH_EFAIL, "cannot finish %s", tmp);
	if (rc == 0 && (p.failed || p.held != sizeof zeros || memcmp(p.hold, zeros, sizeof zeros)))
		rc = ah_err_set(err, AH_EFAIL, "cannot pack %s: unexpected tar end", deps);
	if (p.z && archive_write_close(p.z) != ARCHIVE_OK && rc == 0)
		rc = ah_err_set(err, AH_EFAIL, "cannot finish %s", tmp);
	archive_entry_free(raw);
	archive_write_free(tar);
	archive_write_free(p.z);
	if (rc == 0 && rename(tmp, part_path) != 0)
		rc = ah_err_set(err, AH_EFAIL, "cannot place %s", part_path);
	unlink(tmp);
	return rc;
}

static int copy_into(int to, const char *from, ah_err *err)
{
	int fd = open(from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return ah_err_set(err, AH_EFAIL, "cannot open %s", from);
	ssize_t n;
	while ((n = copy_file_range(fd, NULL, to, NULL, 1 << 30, 0)) > 0)
		;
	close(fd);
	return n == 0 ? 0 : ah_err_set(err, AH_EFAIL, "cannot copy %s", from);
}

int ah_image_pack(const char *dir, const char *dest, const char *deps_part, ah_err *err)
{
	char deps[4200];
	struct stat st;
	snprintf(deps, sizeof deps, "%s/node_modules", dir);
	if (!deps_part || lstat(deps, &st) != 0 || !S_ISDIR(st.st_mode))
		return ah_tarball_pack(dir, dest, err);
	int rc = lstat(deps_part, &st) == 0 ? 0 : write_deps_part(dir, deps_part, err);
	int fd = rc == 0 ? open(dest, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;
	if (rc == 0 && fd < 0)
		rc = ah_err_set(err, AH_EFAIL, "cannot create %s", dest);
	if (rc == 0)
		rc = copy_into(fd, deps_part, err);
	struct archive *out = rc == 0 ? tar_writer(fd, NULL) : NULL;
	if (rc == 0 && !out)
		rc = ah_err_set(err, AH_EFAIL, "cannot write %s", dest);
	if (rc == 0)
		rc = walk_into(out, dir, dir, true, err);
	if (out && archive_write_close(out) != ARCHIVE_OK && rc == 0)
		rc = ah_err_set(err, AH_EFAIL, "cannot finish %s: %s", dest, archive_error_string(out));
	archive_write_free(out);
	if (fd >= 0 && close(fd) != 0 && rc == 0)
		rc = ah_err_set(err, AH_EFAIL, "cannot finish %s", dest);
	if (rc != 0) { /* made again next time */
		unlink(deps_part);
		snprintf(deps, sizeof deps, "%s.sha", deps_part);
		unlink(deps);
	}
	return rc;
}

/* The archive's SHA-256 without reading its node_modules frame again: the
 * hash's state after that frame is kept beside it (<part>.sha: the part's
 * size, inode and time, then libsodium's state), made once per tree like the part
 * and linked with it to the next image. Only taken when the part is still
 * the file the state was made from and the archive is at least as long;
 * anything else hashes the whole archive. */
struct part_sha {
	char magic[4];
	long long size, ino, mtime_ns;
	crypto_hash_sha256_state st;
};

static int hash_range(crypto_hash_sha256_state *st, int fd, off_t from, long long *total)
{
	unsigned char buf[1 << 16];
	ssize_t n;
	while ((n = pread(fd, buf, sizeof buf, from)) > 0) {
		crypto_hash_sha256_update(st, buf, (size_t)n);
		from += n;
	}
	*total = (long long)from;
	return n == 0 ? 0 : -1;
}

static bool part_state(const char *part, struct part_sha *ps)
{
	char p[4200];
	struct stat st;
	snprintf(p, sizeof p, "%s.sha", part);
	int fd = open(part, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) != 0) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	FILE *f = fopen(p, "re");
	bool ok = f && fread(ps, sizeof *ps, 1, f) == 1 && memcmp(ps->magic, "AHS1", 4) == 0 &&
	          ps->size == (long long)st.st_size && ps->ino == (long long)st.st_ino &&
	          ps->mtime_ns == (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
	if (f)
		fclose(f);
	long long n = 0;
	if (!ok) { /* made here, once per tree */
		memcpy(ps->magic, "AHS1", 4);
		ps->size = (long long)st.st_size;
		ps->ino = (long long)st.st_ino;
		ps->mtime_ns = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
		crypto_hash_sha256_init(&ps->st);
		ok = hash_range(&ps->st, fd, 0, &n) == 0 && n == ps->size;
		char tmp[4300];
		snprintf(tmp, sizeof tmp, "%s.tmp", p);
		f = ok ? fopen(tmp, "we") : NULL;
		bool written = f && fwrite(ps, sizeof *ps, 1, f) == 1;
		if (f && (fclose(f) != 0 || !written || rename(tmp, p) != 0))
			unlink(tmp);
	}
	close(fd);
	return ok;
}

int ah_image_pack_sha256(const char *archive, const char *deps_part, char sha[65],
                         long long *size, ah_err *err)
{
	struct part_sha ps;
	struct stat st;
	int fd = open(archive, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) != 0) {
		if (fd >= 0)
			close(fd);
		return ah_err_set(err, AH_EFAIL, "cannot read %s", archive);
	}
	bool from_part = deps_part && part_state(deps_part, &ps) && (long long)st.st_size >= ps.size;
	if (!from_part) {
		ps.size = 0;
		crypto_hash_sha256_init(&ps.st);
	}
	int rc = hash_range(&ps.st, fd, (off_t)ps.size, size);
	close(fd);
	if (rc != 0)
		return ah_err_set(err, AH_EFAIL, "cannot read %s", archive);
	unsigned char h[crypto_hash_sha256_BYTES];
	crypto_hash_sha256_final(&ps.st, h);
	sodium_bin2hex(sha, 65, h, sizeof h);
	return 0;
}
