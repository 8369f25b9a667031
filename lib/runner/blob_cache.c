/* The runner's copies of S3 blobs: see blob_cache.h. */
#include "runner/blob_cache.h"
#include "core/io.h"
#include "core/log.h"
#include "core/settings.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SHA_LEN 64

/* Only a blob's name (64 lowercase hex digits) names a copy: the sha comes
 * in a run request, and nothing else may become a path. */
static bool is_sha(const char *sha)
{
	return strlen(sha) == SHA_LEN && strspn(sha, "0123456789abcdef") == SHA_LEN;
}

static bool cache_on(const ah_config *cfg)
{
	return ah_settings_of(cfg)->runner.blob_cache_mb > 0;
}

static void cache_dir(const ah_config *cfg, char *out, size_t cap)
{
	snprintf(out, cap, "%s/blob-cache", ah_settings_of(cfg)->host.data_dir);
}

int ah_blob_cache_open(const ah_config *cfg, const char *sha, int *fd)
{
	char dir[1024], path[1200];
	struct stat st;
	*fd = -1;
	if (!is_sha(sha) || !cache_on(cfg))
		return AH_ENOTFOUND;
	cache_dir(cfg, dir, sizeof dir);
	snprintf(path, sizeof path, "%s/%s", dir, sha);
	int f = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (f < 0)
		return AH_ENOTFOUND;
	if (fstat(f, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(f);
		return AH_ENOTFOUND;
	}
	futimens(f, NULL); /* used now: the sweep goes by the time of last use */
	*fd = f;
	return 0;
}

/* fd's bytes (from offset 0, whatever its position) into out, hashed on the
 * way: 0 when all were copied and their SHA-256 is sha. */
static int copy_checked(int fd, int out, const char *sha)
{
	crypto_hash_sha256_state h;
	unsigned char d[crypto_hash_sha256_BYTES];
	char hex[SHA_LEN + 1], buf[1 << 16];
	off_t off = 0;
	ssize_t n;
	crypto_hash_sha256_init(&h);
	while ((n = pread(fd, buf, sizeof buf, off)) > 0) {
		if (ah_write_all(out, buf, (size_t)n) != 0)
			return -1;
		crypto_hash_sha256_update(&h, (const unsigned char *)buf, (unsigned long long)n);
		off += n;
	}
	crypto_hash_sha256_final(&h, d);
	sodium_bin2hex(hex, sizeof hex, d, sizeof d);
	return n == 0 && strcmp(hex, sha) == 0 ? 0 : 1;
}

/* Written under a name of its own, then renamed: a reader sees a whole copy
 * or none, and two calls keeping the same blob at once both succeed. A copy
 * whose bytes do not match its name is not kept (1), and logged. */
static int write_copy(const char *dir, const char *sha, int fd)
{
	char tmp[1200], path[1200];
	snprintf(tmp, sizeof tmp, "%s/.%s.%08x", dir, sha, randombytes_random());
	snprintf(path, sizeof path, "%s/%s", dir, sha);
	int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return -1;
	int rc = copy_checked(fd, out, sha);
	if (close(out) != 0 && rc == 0)
		rc = -1;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -1;
	if (rc != 0)
		unlink(tmp);
	if (rc == 1)
		ah_log_error("blob %s from the store does not match its name: not kept", sha);
	return rc;
}

void ah_blob_cache_keep(const ah_config *cfg, const char *sha, int fd)
{
	char dir[1024];
	if (!is_sha(sha) || !cache_on(cfg))
		return;
	cache_dir(cfg, dir, sizeof dir);
	int rc = mkdir(dir, 0700) != 0 && errno != EEXIST ? -1 : write_copy(dir, sha, fd);
	if (rc < 0) {
		ah_log_warn("blob cache %s: %s", dir, strerror(errno));
		return;
	}
	ah_blob_cache_tidy(cfg);
}

typedef struct copy {
	char name[SHA_LEN + 16];
	time_t used;
	long long size;
} copy;

static int by_use(const void *a, const void *b)
{
	const copy *x = a, *y = b;
	return (x->used > y->used) - (x->used < y->used);
}

/* The copies in dir (regular files named by a sha) into *out, oldest use
 * first; their count. Copies last used before idle_before go on the way, and
 * temporary files older than a minute (a write that never ended). */
static long list_copies(int dfd, DIR *d, time_t idle_before, copy **out)
{
	time_t stale_tmp = time(NULL) - 60;
	size_t n = 0, cap = 0;
	*out = NULL;
	for (struct dirent *e; (e = readdir(d));) {
		struct stat st;
		if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
			continue;
		bool named = is_sha(e->d_name);
		if (st.st_mtime < (named ? idle_before : stale_tmp))
			unlinkat(dfd, e->d_name, 0);
		if (!named || st.st_mtime < idle_before)
			continue;
		if (n == cap) {
			copy *grown = realloc(*out, (cap = cap ? cap * 2 : 64) * sizeof **out);
			if (!grown)
				break;
			*out = grown;
		}
		snprintf((*out)[n].name, sizeof (*out)[n].name, "%s", e->d_name);
		(*out)[n].used = st.st_mtime, (*out)[n].size = (long long)st.st_size;
		n++;
	}
	qsort(*out, n, sizeof **out, by_use);
	return (long)n;
}

void ah_blob_cache_sweep(const ah_config *cfg, long long idle_s, long long max_bytes)
{
	char dir[1024];
	cache_dir(cfg, dir, sizeof dir);
	DIR *d = opendir(dir);
	if (!d)
		return;
	copy *c;
	long n = list_copies(dirfd(d), d, time(NULL) - idle_s, &c);
	long long total = 0;
	for (long i = 0; i < n; i++)
		total += c[i].size;
	for (long i = 0; i < n && (total > max_bytes || max_bytes <= 0); i++) {
		unlinkat(dirfd(d), c[i].name, 0);
		total -= c[i].size;
	}
	free(c);
	closedir(d);
}

void ah_blob_cache_tidy(const ah_config *cfg)
{
	const ah_runner_settings *s = &ah_settings_of(cfg)->runner;
	ah_blob_cache_sweep(cfg, s->blob_cache_idle_seconds, s->blob_cache_mb << 20);
}
