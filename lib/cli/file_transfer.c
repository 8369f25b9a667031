/* files upload and files download: the bytes. Both stream: an upload is read
 * from the file as curl sends it (multipart up to 10 MB, above that a presigned
 * PUT after hashing the file in a pass of its own), a download is written to a
 * temporary file beside the target and renamed onto it at the end, so that a
 * broken transfer leaves nothing that looks complete and an existing file is
 * only replaced with --force. */
#include "cli/cli.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MULTIPART_MAX (10LL << 20)   /* API.md: POST /files takes up to 10 MB */
#define TRANSFER_TIMEOUT 3600L

/* The media type from the extension: what a browser would send. */
static const char *guess_type(const char *name)
{
	static const char *const types[][2] = {
		{".txt", "text/plain"}, {".md", "text/markdown"}, {".csv", "text/csv"},
		{".json", "application/json"}, {".html", "text/html"}, {".pdf", "application/pdf"},
		{".png", "image/png"}, {".jpg", "image/jpeg"}, {".jpeg", "image/jpeg"},
		{".gif", "image/gif"}, {".zip", "application/zip"}, {".gz", "application/gzip"},
		{".js", "text/javascript"}, {".xml", "application/xml"}, {".yaml", "application/yaml"},
	};
	const char *dot = strrchr(name, '.');
	for (size_t i = 0; dot && i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcasecmp(dot, types[i][0]))
			return types[i][1];
	return "application/octet-stream";
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

static void free_mime(void *p)
{
	curl_mime_free(p);
}

static void add_field(curl_mime *m, const char *name, const char *value)
{
	curl_mimepart *p = curl_mime_addpart(m);
	curl_mime_name(p, name);
	curl_mime_data(p, value, CURL_ZERO_TERMINATED);
}

static int upload_multipart(struct ah_cli *c, const struct ah_cli_args *a, const char *type,
                            struct ah_cli_resp *r, ah_err *err)
{
	const struct ah_cli_files_opts *o = a->opts;
	const struct { const char *v, *field; } fields[] = {
		{o->description, "description"}, {o->tags, "tags"}, {o->agent, "agent_slug"}};
	curl_mime *m = curl_mime_init(c->curl);
	if (!m)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	ah_arena_on_cleanup(c->a, free_mime, m);
	curl_mimepart *p = curl_mime_addpart(m);
	curl_mime_name(p, "file");
	if (curl_mime_filedata(p, a->pos[0]) != CURLE_OK)
		return ah_err_set(err, AH_EFAIL, "cannot read %s", a->pos[0]);
	curl_mime_type(p, type);
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (fields[i].v)
			add_field(m, fields[i].field, fields[i].v);
	struct ah_cli_req rq = {.method = "POST", .path = "/files", .mime = m,
	                        .timeout = TRANSFER_TIMEOUT, .progress = true};
	return ah_cli_call(c, &rq, r, err);
}

/* The file's SHA-256 in hex, read in a pass of its own (confirm checks it). */
static int hash_file(struct ah_cli *c, FILE *f, char hex[65], ah_err *err)
{
	crypto_hash_sha256_state st;
	unsigned char buf[65536], sum[crypto_hash_sha256_BYTES];
	size_t n;
	if (sodium_init() < 0)
		return ah_err_set(err, AH_EFAIL, "libsodium cannot start");
	crypto_hash_sha256_init(&st);
	rewind(f);
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		crypto_hash_sha256_update(&st, buf, n);
	if (ferror(f))
		return ah_err_set(err, AH_EFAIL, "cannot read the file: %s", strerror(errno));
	crypto_hash_sha256_final(&st, sum);
	sodium_bin2hex(hex, 65, sum, sizeof(sum));
	(void)c;
	return 0;
}

static int presign(struct ah_cli *c, const struct ah_cli_args *a, const char *type, long long size,
                   struct ah_cli_resp *r, ah_err *err)
{
	const struct ah_cli_files_opts *o = a->opts;
	json_object *body = ah_cli_obj(c);
	json_object_object_add(body, "filename", json_object_new_string(base_name(a->pos[0])));
	json_object_object_add(body, "size_bytes", json_object_new_int64(size));
	json_object_object_add(body, "content_type", json_object_new_string(type));
	if (o->description)
		json_object_object_add(body, "description", json_object_new_string(o->description));
	if (o->tags)
		json_object_object_add(body, "tags", json_object_new_string(o->tags));
	if (o->agent)
		json_object_object_add(body, "agent_slug", json_object_new_string(o->agent));
	return ah_cli_send(c, "POST", "/files/presigned-upload", body, r, err);
}

/* A presigned upload that failed: its pending record goes at once, with the
 * quota it reserved (else it would count until it expires). Best effort: the
 * error the user sees is the upload's, rc. */
static int drop_pending(struct ah_cli *c, const char *id, int rc)
{
	struct ah_cli_resp r;
	ah_err ignored;
	ah_cli_send(c, "DELETE", ah_sprintf(c->a, "/files/%s", ah_cli_seg(c, id)), NULL, &r, &ignored);
	return rc;
}

/* > 10 MB: reserve, PUT the bytes to upload_url (no key), confirm with the hash. */
static int upload_presigned(struct ah_cli *c, const struct ah_cli_args *a, const char *type, FILE *f,
                            long long size, struct ah_cli_resp *r, ah_err *err)
{
	char hex[65];
	struct ah_cli_resp put;
	json_object *v;
	int rc = hash_file(c, f, hex, err);
	if (!rc)
		rc = presign(c, a, type, size, r, err);
	if (rc)
		return rc;
	if (!json_object_object_get_ex(r->body, "upload_url", &v) || !json_object_is_type(v, json_type_string))
		return ah_err_set(err, AH_EFAIL, "the API's presigned upload has no upload_url");
	const char *url = ah_strdup(c->a, json_object_get_string(v));
	const char *id = ah_cli_text(c, r->body, "file_id", AH_COL_TEXT);
	struct ah_cli_req rq = {.method = "PUT", .url = url, .upload = f, .upload_size = size,
	                        .content_type = type, .timeout = TRANSFER_TIMEOUT, .progress = true};
	rc = ah_cli_call(c, &rq, &put, err);
	if (rc) {
		ah_err_set(err, err->code, "uploading %s: %s", id, err->msg);
		return drop_pending(c, id, rc);
	}
	json_object *body = ah_cli_obj(c);
	json_object_object_add(body, "sha256_hash", json_object_new_string(hex));
	rc = ah_cli_send(c, "POST", ah_sprintf(c->a, "/files/%s/confirm", ah_cli_seg(c, id)), body, r, err);
	return rc ? drop_pending(c, id, rc) : 0;
}

int ah_cli_files_upload(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	struct stat st;
	const char *type = ((const struct ah_cli_files_opts *)a->opts)->content_type;
	FILE *f = fopen(a->pos[0], "rb");
	if (!f)
		return ah_cli_usage(err, "cannot open %s: %s", a->pos[0], strerror(errno));
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		fclose(f);
		return ah_cli_usage(err, "%s is not a regular file", a->pos[0]);
	}
	if (!type)
		type = guess_type(a->pos[0]);
	int rc = st.st_size <= MULTIPART_MAX ? upload_multipart(c, a, type, &r, err)
	                                     : upload_presigned(c, a, type, f, st.st_size, &r, err);
	fclose(f);
	if (!rc)
		ah_cli_show_file(c, r.body, NULL);
	return rc;
}

/* The server's filename as a name in the current directory: never a path. */
static int local_name(struct ah_cli *c, json_object *rec, const char **out, ah_err *err)
{
	const char *name = ah_cli_text(c, rec, "filename", AH_COL_TEXT);
	if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, "-"))
		return ah_err_set(err, AH_EFAIL, "the file's name \"%s\" cannot be a local name; give -o PATH", name);
	*out = name;
	return 0;
}

/* The temporary file beside target, in its directory (rename stays on one
 * file system). */
static int open_temp(struct ah_cli *c, const char *target, char **tmp, FILE **f, ah_err *err)
{
	const char *slash = strrchr(target, '/');
	*tmp = ah_sprintf(c->a, "%.*s.agenthost-XXXXXX", slash ? (int)(slash - target + 1) : 0, target);
	int fd = mkstemp(*tmp);
	if (fd < 0)
		return ah_err_set(err, AH_EFAIL, "cannot write beside %s: %s", target, strerror(errno));
	mode_t mask = umask(0);   /* mkstemp's 0600 would outlive the rename */
	umask(mask);
	*f = fchmod(fd, 0666 & ~mask) == 0 ? fdopen(fd, "wb") : NULL;
	if (!*f) {
		close(fd);
		unlink(*tmp);
		return ah_err_set(err, AH_EFAIL, "cannot write beside %s: %s", target, strerror(errno));
	}
	return 0;
}

/* The finished temporary file becomes target: rename with --force, else a link
 * that fails if target appeared meanwhile. */
static int put_in_place(const char *tmp, const char *target, bool force, ah_err *err)
{
	int rc = force ? rename(tmp, target) : link(tmp, target);
	int e = errno;
	if (!force || rc != 0)
		unlink(tmp);
	if (rc == 0)
		return 0;
	if (e == EEXIST)
		return ah_cli_usage(err, "%s exists; --force overwrites it", target);
	return ah_err_set(err, AH_EFAIL, "cannot write %s: %s", target, strerror(e));
}

static int fetch(struct ah_cli *c, const char *id, FILE *f, struct ah_cli_resp *r, ah_err *err)
{
	struct ah_cli_req rq = {.method = "GET", .path = ah_sprintf(c->a, "/files/%s/download", ah_cli_seg(c, id)),
	                        .download = f, .timeout = TRANSFER_TIMEOUT, .progress = true};
	int rc = ah_cli_call(c, &rq, r, err);
	if (!rc && fflush(f) != 0)
		rc = ah_err_set(err, AH_EFAIL, "cannot write the download: %s", strerror(errno));
	return rc;
}

static int download_to(struct ah_cli *c, const char *id, const char *target, bool force,
                       struct ah_cli_resp *r, ah_err *err)
{
	char *tmp;
	FILE *f;
	if (!force && access(target, F_OK) == 0)
		return ah_cli_usage(err, "%s exists; --force overwrites it", target);
	int rc = open_temp(c, target, &tmp, &f, err);
	if (rc)
		return rc;
	rc = fetch(c, id, f, r, err);
	if (fclose(f) != 0 && !rc)
		rc = ah_err_set(err, AH_EFAIL, "cannot write %s: %s", tmp, strerror(errno));
	if (rc) {
		unlink(tmp);
		return rc;
	}
	return put_in_place(tmp, target, force, err);
}

int ah_cli_files_download(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp rec, r;
	const struct ah_cli_files_opts *o = a->opts;
	const char *target = o->output;
	struct stat st;
	const char *name = NULL;
	int rc = ah_cli_get(c, ah_sprintf(c->a, "/files/%s", ah_cli_seg(c, a->pos[0])), &rec, err);
	bool into_dir = !target || (strcmp(target, "-") && stat(target, &st) == 0 && S_ISDIR(st.st_mode));
	if (!rc && into_dir)
		rc = local_name(c, rec.body, &name, err);
	if (rc)
		return rc;
	if (into_dir)   /* -o DIR: the server's filename in DIR */
		target = target ? ah_sprintf(c->a, "%s/%s", target, name) : name;
	if (!strcmp(target, "-"))
		return fetch(c, a->pos[0], stdout, &r, err);
	rc = download_to(c, a->pos[0], target, o->force, &r, err);
	if (rc)
		return rc;
	if (c->json) {
		json_object_object_add(rec.body, "path", json_object_new_string(target));
		ah_cli_print_json(c, rec.body);
	} else {
		ah_cli_note(c, "Saved %s (%lld bytes)", target, r.written);
	}
	return 0;
}
