/* The storage backend: where a blob's bytes live and how they get there. */
#include "files/files.h"
#include "s3/s3.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Presigned downloads live a few minutes: long enough to start, short enough
 * that a leaked link dies soon. */
#define DOWNLOAD_URL_SECONDS 300

struct ah_store {
	char dir[1024];
	bool s3;
	ah_s3 bucket;
	gid_t gid;      /* nginx's group: blobs are readable by it */
	bool have_gid;
	/* files_dir's owner, given to everything made under it: an installed API
	 * runs as its own user (agenthost) and must write and remove what the
	 * runner (root) made there too. Root in a checkout. */
	uid_t uid;
};

static int make_dir(const ah_store *s, const char *path, mode_t mode, bool chgrp, ah_err *err)
{
	if (mkdir(path, mode) != 0 && errno != EEXIST)
		return ah_err_set(err, AH_EFAIL, "cannot create %s: %s", path, strerror(errno));
	if (chmod(path, mode) != 0)
		return ah_err_set(err, AH_EFAIL, "chmod %s: %s", path, strerror(errno));
	if (chown(path, s->uid, chgrp && s->have_gid ? s->gid : (gid_t)-1) != 0)
		return ah_err_set(err, AH_EFAIL, "chown %s: %s", path, strerror(errno));
	return 0;
}

static int open_local(ah_store *s, ah_err *err)
{
	static const struct { const char *sub; mode_t mode; bool nginx; } dirs[] = {
		{"", 0750, true}, {"/blobs", 0750, true}, {"/tmp", 0700, false}, {"/pending", 0700, false},
	};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char p[1100];
		snprintf(p, sizeof(p), "%s%s", s->dir, dirs[i].sub);
		int rc = make_dir(s, p, dirs[i].mode, dirs[i].nginx, err);
		if (rc)
			return rc;
	}
	return 0;
}

int ah_store_open(ah_store **out, const ah_config *cfg, ah_err *err)
{
	ah_store *s = calloc(1, sizeof(*s));
	if (!s)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	const ah_files_settings *set = &ah_settings_of(cfg)->files;
	snprintf(s->dir, sizeof(s->dir), "%s", set->dir);
	struct stat st;
	s->uid = stat(s->dir, &st) == 0 ? st.st_uid : geteuid();
	struct group *g = getgrnam(ah_settings_of(cfg)->api.socket_group);
	if (g) {
		s->gid = g->gr_gid;
		s->have_gid = true;
	}
	const char *backend = set->backend;
	int rc = 0;
	if (strcmp(backend, "s3") == 0) {
		s->s3 = true;
		rc = ah_s3_init(&s->bucket, set->s3_endpoint, set->s3_bucket, set->s3_region,
		                set->s3_access_key_id, set->s3_secret_access_key, err);
		if (rc == 0 && !*s->bucket.bucket)
			rc = ah_err_set(err, AH_EINVALID, "storage_backend = s3 needs s3_bucket");
	} else if (strcmp(backend, "local") != 0) {
		rc = ah_err_set(err, AH_EINVALID, "storage_backend must be local or s3, not '%s'", backend);
	}
	if (rc == 0)
		rc = open_local(s, err); /* tmp/ serves the S3 backend too */
	if (rc) {
		sodium_memzero(s, sizeof(*s));
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void ah_store_close(ah_store *s)
{
	if (s) {
		sodium_memzero(s, sizeof(*s));
		free(s);
	}
}

bool ah_store_is_s3(const ah_store *s) { return s->s3; }
const char *ah_store_dir(const ah_store *s) { return s->dir; }

int ah_store_tmp(const ah_store *s, ah_arena *a, int *fd, char **path, ah_err *err)
{
	*path = ah_sprintf(a, "%s/tmp/up-XXXXXX", s->dir);
	*fd = mkostemp(*path, O_CLOEXEC);
	if (*fd < 0)
		return ah_err_set(err, ah_err_disk(errno), "cannot create %s: %s", *path, strerror(errno));
	return 0;
}

char *ah_store_pending_path(const ah_store *s, ah_arena *a, const char *file_id)
{
	return ah_sprintf(a, "%s/pending/%s", s->dir, file_id);
}

char *ah_store_pending_key(ah_arena *a, const char *file_id)
{
	return ah_sprintf(a, "pending/%s", file_id);
}

static void blob_path(char *out, size_t cap, const ah_store *s, const char *sha)
{
	snprintf(out, cap, "%s/blobs/%.2s/%s", s->dir, sha, sha);
}

static void blob_key(char *out, size_t cap, const char *sha)
{
	snprintf(out, cap, "blobs/%s", sha);
}

static int put_local(const ah_store *s, const char *sha, const char *src, ah_err *err)
{
	char dst[1200], sub[1100];
	struct stat st;
	blob_path(dst, sizeof(dst), s, sha);
	if (stat(dst, &st) == 0) {
		unlink(src); /* the same bytes are there already */
		return 0;
	}
	snprintf(sub, sizeof(sub), "%s/blobs/%.2s", s->dir, sha);
	int rc = make_dir(s, sub, 0750, true, err);
	/* nginx (the socket group) reads blobs; nobody writes them again. */
	if (rc == 0 && (chmod(src, 0640) != 0 || chown(src, s->uid, s->have_gid ? s->gid : (gid_t)-1) != 0))
		rc = ah_err_set(err, AH_EFAIL, "cannot set the mode of %s: %s", src, strerror(errno));
	if (rc == 0 && rename(src, dst) != 0)
		rc = ah_err_set(err, AH_EFAIL, "rename %s: %s", dst, strerror(errno));
	if (rc)
		unlink(src);
	return rc;
}

int ah_store_put(const ah_store *s, const char *sha, const char *src, const char *content_type,
                 ah_err *err)
{
	if (!s->s3)
		return put_local(s, sha, src, err);
	char key[96];
	int64_t size;
	blob_key(key, sizeof(key), sha);
	int rc = ah_s3_head(&s->bucket, key, &size, err);
	if (rc == AH_ENOTFOUND)
		rc = ah_s3_put_file(&s->bucket, key, src, content_type, err);
	unlink(src);
	return rc;
}

int ah_store_remove(const ah_store *s, const char *sha, ah_err *err)
{
	char p[1200];
	if (s->s3) {
		blob_key(p, sizeof(p), sha);
		return ah_s3_delete(&s->bucket, p, err);
	}
	blob_path(p, sizeof(p), s, sha);
	if (unlink(p) != 0 && errno != ENOENT)
		return ah_err_set(err, AH_EFAIL, "unlink %s: %s", p, strerror(errno));
	return 0;
}

static int copy_file(const char *src, const char *dest, ah_err *err)
{
	int in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return ah_err_set(err, errno == ENOENT ? AH_ENOTFOUND : AH_EFAIL, "open %s: %s", src,
		                  strerror(errno));
	int out = open(dest, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	int rc = out < 0 ? ah_err_set(err, AH_EFAIL, "create %s: %s", dest, strerror(errno)) : 0;
	char buf[65536];
	ssize_t n;
	while (rc == 0 && (n = read(in, buf, sizeof(buf))) != 0) {
		ssize_t w = n < 0 ? -1 : write(out, buf, (size_t)n);
		if (w >= 0 && w < n)
			errno = ENOSPC; /* a short write to a file: its disk is full */
		if (w != n)
			rc = ah_err_set(err, ah_err_disk(errno), "copy to %s: %s", dest, strerror(errno));
	}
	close(in);
	if (out >= 0 && close(out) != 0 && rc == 0)
		rc = ah_err_set(err, ah_err_disk(errno), "close %s: %s", dest, strerror(errno));
	if (rc && out >= 0)
		unlink(dest);
	return rc;
}

int ah_store_fetch(const ah_store *s, const char *sha, const char *dest, ah_err *err)
{
	char p[1200];
	if (s->s3) {
		blob_key(p, sizeof(p), sha);
		return ah_s3_get_file(&s->bucket, p, dest, err);
	}
	blob_path(p, sizeof(p), s, sha);
	return copy_file(p, dest, err);
}

int ah_store_open_blob(const ah_store *s, ah_arena *a, const char *sha, int *fd, ah_err *err)
{
	char p[1200], *tmp;
	int tfd;
	if (!s->s3) {
		blob_path(p, sizeof(p), s, sha);
		*fd = open(p, O_RDONLY | O_CLOEXEC);
		return *fd >= 0 ? 0 : ah_err_set(err, AH_EFAIL, "open %s: %s", p, strerror(errno));
	}
	if (ah_store_tmp(s, a, &tfd, &tmp, err) != 0)
		return AH_EFAIL;
	close(tfd);
	int rc = ah_store_fetch(s, sha, tmp, err);
	*fd = rc == 0 ? open(tmp, O_RDONLY | O_CLOEXEC) : -1;
	if (rc == 0 && *fd < 0)
		rc = ah_err_set(err, AH_EFAIL, "open %s: %s", tmp, strerror(errno));
	unlink(tmp); /* the descriptor keeps the copy */
	return rc;
}

int ah_store_download(const ah_store *s, ah_arena *a, const char *sha, const char *content_type,
                      const char *disposition, char **out, bool *redirect, ah_err *err)
{
	*redirect = s->s3;
	if (!s->s3) {
		/* nginx's internal location (nginx/agenthost-locations.conf) maps onto blobs/. */
		*out = ah_sprintf(a, "/_ah_files/%.2s/%s", sha, sha);
		return 0;
	}
	char key[96];
	blob_key(key, sizeof(key), sha);
	const char *extra[] = {"response-content-disposition", disposition,
	                       "response-content-type", content_type, NULL};
	*out = ah_alloc(a, AH_S3_URL_MAX);
	return ah_s3_presign_q(*out, AH_S3_URL_MAX, &s->bucket, "GET", key, DOWNLOAD_URL_SECONDS,
	                       time(NULL), extra, err);
}

int ah_store_presign_put(const ah_store *s, ah_arena *a, const char *file_id, long expires_s,
                         char **url, ah_err *err)
{
	*url = ah_alloc(a, AH_S3_URL_MAX);
	return ah_s3_presign(*url, AH_S3_URL_MAX, &s->bucket, "PUT", ah_store_pending_key(a, file_id),
	                     expires_s, time(NULL), err);
}

int ah_store_take_pending(const ah_store *s, ah_arena *a, const char *file_id, char **path,
                          ah_err *err)
{
	int fd;
	int rc = ah_store_tmp(s, a, &fd, path, err);
	if (rc)
		return rc;
	close(fd);
	return ah_s3_get_file(&s->bucket, ah_store_pending_key(a, file_id), *path, err);
}

void ah_store_drop_pending(const ah_store *s, ah_arena *a, const char *file_id)
{
	ah_err err;
	if (s->s3)
		(void)ah_s3_delete(&s->bucket, ah_store_pending_key(a, file_id), &err);
	else
		unlink(ah_store_pending_path(s, a, file_id));
}

int ah_file_sha256(const char *path, char hex[65], long long *size, ah_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ah_err_set(err, errno == ENOENT ? AH_ENOTFOUND : AH_EFAIL, "open %s: %s", path,
		                  strerror(errno));
	crypto_hash_sha256_state st;
	unsigned char buf[65536], d[crypto_hash_sha256_BYTES];
	ssize_t n;
	crypto_hash_sha256_init(&st);
	*size = 0;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		crypto_hash_sha256_update(&st, buf, (size_t)n);
		*size += n;
	}
	close(fd);
	if (n < 0)
		return ah_err_set(err, AH_EFAIL, "read %s: %s", path, strerror(errno));
	crypto_hash_sha256_final(&st, d);
	sodium_bin2hex(hex, 65, d, sizeof(d));
	return 0;
}

struct pending_walk {
	int (*fn)(void *ud, const char *file_id);
	void *ud;
};

static int pending_key(void *ud, const char *key, int64_t size)
{
	struct pending_walk *w = ud;
	(void)size;
	return strncmp(key, "pending/", 8) == 0 ? w->fn(w->ud, key + 8) : 0;
}

int ah_store_each_pending(const ah_store *s, int (*fn)(void *ud, const char *file_id), void *ud,
                          ah_err *err)
{
	struct pending_walk w = {fn, ud};
	return s->s3 ? ah_s3_list(&s->bucket, "pending/", 1000, pending_key, &w, err) : 0;
}

int ah_store_tmp_copy(const ah_store *s, ah_arena *a, const char *src, char **path, ah_err *err)
{
	int fd;
	int rc = ah_store_tmp(s, a, &fd, path, err);
	if (rc != 0)
		return rc;
	close(fd);
	return copy_file(src, *path, err); /* removes *path when it fails */
}
