/* Images share identical files (issue 27: ten agents on the Claude Agent
 * SDK would otherwise hold ten copies of its 400 MB binary).
 *
 * After an image is built and made read-only, each of its regular files of
 * at least MIN_BYTES is looked up in a host-wide content-addressed store,
 * <data_dir>/store/<xx>/<sha256>-<mode>: when the store has it, the image's
 * file is replaced by a hard link to it (an atomic rename over the name);
 * otherwise the file itself is linked into the store. The store lives in
 * data_dir (0700, the runner's alone) and holds only files of images, which
 * the runner extracted itself (root's, no setuid bits) and which are
 * read-only in every sandbox (the lower layer of an overlay: a write copies
 * the file up into the sandbox's own layer, never into the shared inode).
 *
 * Deleting is by name: removing an image unlinks its names only, so a file
 * another image links stays. The sweep then removes store entries that no
 * image links any more (link count 1: the store's own name). A sweep racing
 * a dedupe can at worst drop a name a new image just linked; that image keeps
 * its inode and the next image with those bytes makes a new entry. */
#include "deploy/deploy.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIN_BYTES 4096 /* smaller files cost an inode either way */

static __thread const char *walk_store;
static __thread long long walk_shared, walk_files;

static int hash_fd(int fd, char out[65])
{
	crypto_hash_sha256_state st;
	unsigned char h[crypto_hash_sha256_BYTES];
	char buf[1 << 16];
	ssize_t n;
	crypto_hash_sha256_init(&st);
	while ((n = read(fd, buf, sizeof buf)) > 0)
		crypto_hash_sha256_update(&st, (unsigned char *)buf, (size_t)n);
	crypto_hash_sha256_final(&st, h);
	sodium_bin2hex(out, 65, h, sizeof h);
	return n == 0 ? 0 : -1;
}

/* The image's name now points at the store's inode. */
static int take_from_store(const char *entry, const char *path)
{
	char tmp[4200];
	snprintf(tmp, sizeof tmp, "%s.ah-dedupe", path);
	unlink(tmp);
	if (link(entry, tmp) != 0)
		return -1;
	if (rename(tmp, path) != 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

static int one_file(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)f;
	if (flag != FTW_F || !S_ISREG(st->st_mode) || st->st_size < MIN_BYTES)
		return 0;
	if (st->st_nlink > 1) { /* already shared: a reused tree (reuse.c) links the store's */
		walk_files++;
		walk_shared += st->st_size;
		return 0;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	char sha[65], dir[4200], entry[4300];
	if (fd < 0)
		return 0;
	int rc = hash_fd(fd, sha);
	close(fd);
	if (rc != 0)
		return 0;
	snprintf(dir, sizeof dir, "%s/%.2s", walk_store, sha);
	snprintf(entry, sizeof entry, "%s/%s-%04o", dir, sha, (unsigned)(st->st_mode & 07777));
	walk_files++;
	struct stat es;
	if (lstat(entry, &es) == 0 && S_ISREG(es.st_mode) && es.st_size == st->st_size) {
		if (es.st_ino == st->st_ino && es.st_dev == st->st_dev)
			walk_shared += st->st_size; /* already the store's (a reused tree) */
		else if (take_from_store(entry, path) == 0)
			walk_shared += st->st_size;
		return 0;
	}
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return 0;
	if (link(path, entry) != 0 && errno == EEXIST && take_from_store(entry, path) == 0)
		walk_shared += st->st_size; /* another deploy placed it first */
	return 0;
}

void ah_image_dedupe(const char *image_dir, const char *store_dir, const char *log_tag)
{
	if (!store_dir || (mkdir(store_dir, 0700) != 0 && errno != EEXIST))
		return;
	walk_store = store_dir;
	walk_shared = walk_files = 0;
	if (nftw(image_dir, one_file, 32, FTW_PHYS | FTW_MOUNT) != 0)
		ah_log_warn("%s: sharing the image's files stopped: %s", log_tag, strerror(errno));
	ah_log_info("%s: %lld files of the image in the shared store, %lld MB already there",
	            log_tag, walk_files, walk_shared >> 20);
}

static int sweep_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)f;
	if (flag == FTW_F && S_ISREG(st->st_mode) && st->st_nlink == 1)
		unlink(path); /* no image links it any more */
	return 0;
}

void ah_image_store_sweep(const char *store_dir)
{
	struct stat st;
	if (store_dir && stat(store_dir, &st) == 0)
		nftw(store_dir, sweep_one, 32, FTW_PHYS | FTW_MOUNT);
}

/* <data_dir>/store from an image path <data_dir>/images/<agent>/<job>. */
int ah_image_store_of(const char *image, char *out, size_t n)
{
	const char *p = image ? strstr(image, "/images/") : NULL, *last = NULL;
	for (; p; p = strstr(p + 1, "/images/"))
		last = p;
	if (!last || (size_t)(last - image) + 7 > n)
		return -1;
	snprintf(out, n, "%.*s/store", (int)(last - image), image);
	return 0;
}
