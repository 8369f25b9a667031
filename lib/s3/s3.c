/* The object calls over libcurl. libcurl signs each request (CURLOPT_AWS_SIGV4);
 * S3 also wants the payload hash as an x-amz-content-sha256 header, which
 * libcurl reads back as the payload hash it signs. Bodies go from and to files
 * so that object size never meets a memory limit; only listings (small XML) are
 * buffered, under a cap. */
#include "s3/s3.h"
#include "s3/internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define LIST_CAP (4 << 20)

struct call {
	CURL *c;
	struct curl_slist *hdrs;
	char url[2048];
	char sigv4[96];
	char userpwd[260];
	long status;
	const ah_s3_hooks *hooks;
};

static int call_open(struct call *x, const ah_s3 *s, const char *key, const char *query,
                     const char *payload_hash, ah_err *err)
{
	char path[1600];
	memset(x, 0, sizeof(*x));
	if (ah_s3_path(path, sizeof(path), s, key))
		return ah_err_set(err, AH_EINVALID, "s3: key too long");
	int n = snprintf(x->url, sizeof(x->url), "%s%s%s%s", s->endpoint, path,
	                 query ? "?" : "", query ? query : "");
	if (n < 0 || (size_t)n >= sizeof(x->url))
		return ah_err_set(err, AH_EINVALID, "s3: URL too long");
	snprintf(x->sigv4, sizeof(x->sigv4), "aws:amz:%s:s3", s->region);
	snprintf(x->userpwd, sizeof(x->userpwd), "%s:%s", s->access_key, s->secret_key);
	char h[128];
	snprintf(h, sizeof(h), "x-amz-content-sha256: %s", payload_hash);
	x->hdrs = curl_slist_append(NULL, h);
	x->c = curl_easy_init();
	if (!x->c || !x->hdrs)
		return ah_err_set(err, AH_EFAIL, "s3: out of memory");
	curl_easy_setopt(x->c, CURLOPT_URL, x->url);
	curl_easy_setopt(x->c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(x->c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(x->c, CURLOPT_AWS_SIGV4, x->sigv4);
	curl_easy_setopt(x->c, CURLOPT_USERPWD, x->userpwd);
	curl_easy_setopt(x->c, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(x->c, CURLOPT_TIMEOUT, s->timeout_s);
	x->hooks = s->hooks;
	if (x->hooks && x->hooks->prepare)
		x->hooks->prepare(x->hooks->ud, x->c);
	return 0;
}

static int call_add_header(struct call *x, const char *h, ah_err *err)
{
	struct curl_slist *l = curl_slist_append(x->hdrs, h);
	if (!l)
		return ah_err_set(err, AH_EFAIL, "s3: out of memory");
	x->hdrs = l;
	return 0;
}

/* Performs the call; maps a 404 to AH_ENOTFOUND and other non-2xx to AH_EFAIL. */
static int call_run(struct call *x, const char *what, ah_err *err)
{
	curl_easy_setopt(x->c, CURLOPT_HTTPHEADER, x->hdrs);
	CURLcode rc = curl_easy_perform(x->c);
	if (x->hooks && x->hooks->done) {
		long st = 0;
		curl_easy_getinfo(x->c, CURLINFO_RESPONSE_CODE, &st);
		x->hooks->done(x->hooks->ud, (int)rc, rc == CURLE_OK ? st : 0);
	}
	if (rc != CURLE_OK)
		return ah_err_set(err, AH_EFAIL, "s3 %s: %s", what, curl_easy_strerror(rc));
	curl_easy_getinfo(x->c, CURLINFO_RESPONSE_CODE, &x->status);
	if (x->status == 404)
		return ah_err_set(err, AH_ENOTFOUND, "s3 %s: no such object", what);
	if (x->status < 200 || x->status > 299)
		return ah_err_set(err, AH_EFAIL, "s3 %s: HTTP %ld", what, x->status);
	return 0;
}

static void call_close(struct call *x)
{
	if (x->c)
		curl_easy_cleanup(x->c);
	curl_slist_free_all(x->hdrs);
	memset(x->userpwd, 0, sizeof(x->userpwd));
}

int ah_s3_put_file(const ah_s3 *s, const char *key, const char *path,
                   const char *content_type, ah_err *err)
{
	struct call x;
	struct stat st;
	FILE *f = fopen(path, "rb");
	if (!f)
		return ah_err_set(err, AH_EFAIL, "s3 put: cannot open %s: %s", path, strerror(errno));
	int rc = fstat(fileno(f), &st) ? ah_err_set(err, AH_EFAIL, "s3 put: stat failed") : 0;
	if (rc == 0)
		rc = call_open(&x, s, key, NULL, "UNSIGNED-PAYLOAD", err);
	else
		memset(&x, 0, sizeof(x));
	if (rc == 0 && content_type) {
		char h[300];
		snprintf(h, sizeof(h), "Content-Type: %s", content_type);
		rc = call_add_header(&x, h, err);
	}
	/* No "Expect:" override here: libcurl 7.88 would sign the removed header,
	 * and S3 would reject the signature. */
	if (rc == 0) {
		curl_easy_setopt(x.c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(x.c, CURLOPT_READDATA, f);
		curl_easy_setopt(x.c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)st.st_size);
		rc = call_run(&x, "put", err);
	}
	call_close(&x);
	fclose(f);
	return rc;
}

static size_t write_file(char *p, size_t sz, size_t n, void *ud)
{
	return fwrite(p, sz, n, ud) * sz;
}

int ah_s3_get_file(const ah_s3 *s, const char *key, const char *path, ah_err *err)
{
	struct call x;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return ah_err_set(err, AH_EFAIL, "s3 get: cannot create %s: %s", path, strerror(errno));
	FILE *f = fdopen(fd, "wb");
	if (!f) {
		close(fd);
		unlink(path);
		return ah_err_set(err, AH_EFAIL, "s3 get: out of memory");
	}
	int rc = call_open(&x, s, key, NULL, EMPTY_SHA256, err);
	if (rc == 0) {
		curl_easy_setopt(x.c, CURLOPT_WRITEFUNCTION, write_file);
		curl_easy_setopt(x.c, CURLOPT_WRITEDATA, f);
		/* A 404's XML body must not end up as the object's bytes. */
		curl_easy_setopt(x.c, CURLOPT_FAILONERROR, 1L);
		rc = call_run(&x, "get", err);
		long st = 0;
		curl_easy_getinfo(x.c, CURLINFO_RESPONSE_CODE, &st);
		if (rc == AH_EFAIL && st == 404)
			rc = ah_err_set(err, AH_ENOTFOUND, "s3 get: no such object");
	}
	call_close(&x);
	if (fclose(f) != 0 && rc == 0)
		rc = ah_err_set(err, AH_EFAIL, "s3 get: write failed: %s", strerror(errno));
	if (rc)
		unlink(path);
	return rc;
}

int ah_s3_head(const ah_s3 *s, const char *key, int64_t *size, ah_err *err)
{
	struct call x;
	int rc = call_open(&x, s, key, NULL, EMPTY_SHA256, err);
	if (rc == 0) {
		curl_easy_setopt(x.c, CURLOPT_NOBODY, 1L);
		rc = call_run(&x, "head", err);
	}
	if (rc == 0) {
		curl_off_t len = -1;
		curl_easy_getinfo(x.c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
		*size = (int64_t)len;
	}
	call_close(&x);
	return rc;
}

int ah_s3_delete(const ah_s3 *s, const char *key, ah_err *err)
{
	struct call x;
	int rc = call_open(&x, s, key, NULL, EMPTY_SHA256, err);
	if (rc == 0) {
		curl_easy_setopt(x.c, CURLOPT_CUSTOMREQUEST, "DELETE");
		rc = call_run(&x, "delete", err);
	}
	call_close(&x);
	return rc == AH_ENOTFOUND ? 0 : rc;
}
