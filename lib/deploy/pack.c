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

int ah_tarball_pack(const char *dir, const char *dest, ah_err *err)
{
	struct archive *disk = archive_read_disk_new(), *out = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	int rc = 0;
	size_t skip = strlen(dir) + 1;
	if (!disk || !out || !e)
		rc = ah_err_set(err, AH_EFAIL, "out of memory");
	if (rc == 0) {
		archive_read_disk_set_symlink_physical(disk);
		archive_read_disk_set_standard_lookup(disk);
		/* zstd at level 1: a deploy waits for this pack, and an SDK agent's
		 * image is 450 MB, mostly a native binary. gzip -1 took 8 s of CPU on
		 * the binary here, zstd -1 2.3 s for the same size (half); older
		 * images in a store are gzip'd, which the reader still takes. */
		archive_write_add_filter_zstd(out);
		archive_write_set_filter_option(out, "zstd", "compression-level", "1");
		archive_write_set_format_pax_restricted(out);
		if (archive_write_open_filename(out, dest) != ARCHIVE_OK ||
		    archive_read_disk_open(disk, dir) != ARCHIVE_OK)
			rc = ah_err_set(err, AH_EFAIL, "cannot pack %s: %s", dir,
			                archive_error_string(disk));
	}
	for (bool first = true; rc == 0; first = false) {
		int r = archive_read_next_header2(disk, e);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK) {
			rc = ah_err_set(err, AH_EFAIL, "cannot walk %s: %s", dir, archive_error_string(disk));
			break;
		}
		archive_read_disk_descend(disk);
		if (!first) /* the root itself is the archive */
			rc = add_entry(out, e, skip, err);
	}
	if (out && archive_write_close(out) != ARCHIVE_OK && rc == 0)
		rc = ah_err_set(err, AH_EFAIL, "cannot finish %s: %s", dest, archive_error_string(out));
	archive_entry_free(e);
	archive_read_free(disk);
	archive_write_free(out);
	return rc;
}
