/* The runner's copies of S3 blobs (lib/runner/blob_cache.c): a copy is kept
 * only under its own SHA-256 and only when the bytes match it, is read back
 * whole, and goes when unused too long or, oldest use first, when the cache
 * is over its size. */
#include "runner/blob_cache.h"
#include "tap.h"

#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char dir[64], cache[128];

static ah_config *config_in(const char *data_dir, const char *more)
{
	char path[] = "/tmp/ah-test-blobcache-conf-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	fprintf(f, "data_dir = %s\n%s", data_dir, more);
	fclose(f);
	ah_config *c = NULL;
	ah_err err = {0};
	if (ah_config_load(&c, path, &err) != 0)
		fprintf(stderr, "config: %s\n", err.msg);
	unlink(path);
	return c;
}

static void sha_of(const char *buf, size_t len, char out[65])
{
	unsigned char d[crypto_hash_sha256_BYTES];
	crypto_hash_sha256(d, (const unsigned char *)buf, len);
	sodium_bin2hex(out, 65, d, sizeof d);
}

static bool present(const char *name)
{
	char p[256];
	snprintf(p, sizeof p, "%s/%s", cache, name);
	return access(p, F_OK) == 0;
}

/* Keeps len bytes of p as sha's copy, from a file whose position is at its
 * end (the cache reads from offset 0 whatever the position). */
static void keep(const ah_config *c, const char *sha, const char *p, size_t len)
{
	char path[] = "/tmp/ah-test-blobcache-src-XXXXXX";
	int fd = mkstemp(path);
	unlink(path);
	if (fd < 0 || write(fd, p, len) != (ssize_t)len)
		fprintf(stderr, "source file: write failed\n");
	ah_blob_cache_keep(c, sha, fd);
	close(fd);
}

/* sha's copy read back through ah_blob_cache_open: 0, or AH_ENOTFOUND. */
static int read_back(const ah_config *c, const char *sha, char *buf, size_t cap, size_t *len)
{
	int fd = -1, rc = ah_blob_cache_open(c, sha, &fd);
	ssize_t n = rc == 0 ? read(fd, buf, cap) : 0;
	if (fd >= 0)
		close(fd);
	*len = n > 0 ? (size_t)n : 0;
	return rc;
}

/* Last used seconds_ago. */
static void age(const char *name, long seconds_ago)
{
	char p[256];
	snprintf(p, sizeof p, "%s/%s", cache, name);
	struct timespec t[2] = {{.tv_sec = time(NULL) - seconds_ago}, {.tv_sec = time(NULL) - seconds_ago}};
	utimensat(AT_FDCWD, p, t, 0);
}

static void test_kept_and_read(const ah_config *c)
{
	const char *a = "the bytes of a";
	char sha[65], buf[64];
	size_t len = 0;
	sha_of(a, strlen(a), sha);
	ok(read_back(c, sha, buf, sizeof buf, &len) == AH_ENOTFOUND, "no copy before one is kept");
	keep(c, sha, a, strlen(a));
	ok(read_back(c, sha, buf, sizeof buf, &len) == 0 && len == strlen(a) && memcmp(buf, a, len) == 0,
	   "a kept copy reads back whole");
	struct stat st;
	char p[256];
	snprintf(p, sizeof p, "%s/%s", cache, sha);
	ok(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600 && stat(cache, &st) == 0 && (st.st_mode & 0777) == 0700,
	   "the copy is 0600 in a 0700 directory");
}

static void test_refused(const ah_config *c)
{
	char sha[65], buf[64];
	size_t len = 0;
	sha_of("other bytes", 11, sha);
	keep(c, sha, "not those", 9);
	ok(!present(sha), "bytes that do not match their name are not kept");
	keep(c, "../../escape", "x", 1);
	ok(read_back(c, "../../etc/passwd", buf, sizeof buf, &len) == AH_ENOTFOUND,
	   "a name that is not a sha is no path");
}

static void test_sweep(const ah_config *c)
{
	char old[65], lru[65], recent[65];
	const char *x = "xxxxxxxxxx", *y = "yyyyyyyyyy", *z = "zzzzzzzzzz";
	sha_of(x, 10, old), sha_of(y, 10, lru), sha_of(z, 10, recent);
	keep(c, old, x, 10);
	keep(c, lru, y, 10);
	keep(c, recent, z, 10);
	age(old, 700), age(lru, 100), age(recent, 10);
	char tmp_new[256], tmp_old[256];
	snprintf(tmp_new, sizeof tmp_new, "%s/.%s.0001", cache, recent);
	snprintf(tmp_old, sizeof tmp_old, "%s/.%s.0002", cache, recent);
	close(open(tmp_new, O_CREAT | O_WRONLY, 0600));
	close(open(tmp_old, O_CREAT | O_WRONLY, 0600));
	age(strrchr(tmp_old, '/') + 1, 120);
	ah_blob_cache_sweep(c, 600, 25); /* room for the 14 bytes above and one of these */
	ok(!present(old), "a copy unused past the idle time goes");
	ok(!present(lru) && present(recent), "over the size, the least recently used goes first");
	ok(present(strrchr(tmp_new, '/') + 1) && !present(strrchr(tmp_old, '/') + 1),
	   "a copy being written stays, one left for over a minute goes");
}

/* The operator's bounds (blob_cache_idle_seconds, blob_cache_mb) are the
 * ones the minute sweep and each keep hold the cache to; 0 MiB keeps none. */
static void test_configured(void)
{
	ah_config *idle = config_in(dir, "blob_cache_idle_seconds = 30\n");
	ah_config *off = config_in(dir, "blob_cache_mb = 0\n");
	char stale[65], fresh[65], other[65], buf[64];
	size_t len = 0;
	sha_of("stale", 5, stale), sha_of("fresh", 5, fresh), sha_of("other", 5, other);
	keep(idle, stale, "stale", 5);
	keep(idle, fresh, "fresh", 5);
	age(stale, 60), age(fresh, 5);
	ah_blob_cache_tidy(idle);
	ok(!present(stale) && present(fresh), "a copy unused past blob_cache_idle_seconds goes, a newer one stays");
	keep(off, other, "other", 5);
	ok(!present(other), "with blob_cache_mb = 0 nothing is kept");
	ok(read_back(off, fresh, buf, sizeof buf, &len) == AH_ENOTFOUND, "nor read");
	ah_blob_cache_tidy(off);
	ok(!present(fresh), "and the copies kept before are removed by the sweep");
	ah_config_free(idle);
	ah_config_free(off);
}

int main(void)
{
	if (sodium_init() < 0)
		return 1;
	snprintf(dir, sizeof dir, "/tmp/ah-test-blobcache-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	snprintf(cache, sizeof cache, "%s/blob-cache", dir);
	ah_config *c = config_in(dir, "");
	test_kept_and_read(c);
	test_refused(c);
	test_sweep(c);
	test_configured();
	ah_config_free(c);
	char cmd[160];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? tap_done() : 1;
}
