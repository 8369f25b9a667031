/* Presigned uploads: POST /files/presigned-upload reserves the quota and makes
 * a pending record; the client PUTs the bytes to upload_url without a bearer
 * token; POST /files/{id}/confirm checks size and hash and makes the bytes a
 * blob.
 *
 * upload_url is a capability. Local backend: our own PUT /files/{id}/upload
 * with ?expires=<unix>&signature=<HMAC-SHA256 under a subkey of the master key
 * over method, id, expiry and size>: good for that one file, until it expires,
 * and once (the record remembers the bytes arrived). S3 backend: a SigV4
 * presigned PUT of the object pending/<id>, which S3 honours until it expires
 * (S3 cannot count uses; a replay only rewrites the pending object, and confirm
 * reads what is there).
 *
 * The URL is public, so nothing of a PUT's body is stored before the URL is
 * checked: nginx asks (auth_request, before it reads the body) with the PUT's
 * URL and Content-Length, and the worker answers that check without a body
 * (check_put; ah_reply_refusal for nginx). A Content-Length is required and must be the
 * declared size, so nginx itself never takes more than the declared bytes as
 * the body, in either way the body reaches the worker (a file of nginx's own,
 * or streamed); the worker reads no more than that either.
 *
 * Expired pending uploads are swept (with their bytes and reservation) on
 * these paths and on list: at their expiry if nothing arrived, an hour later if
 * the bytes arrived but confirm did not. */
#include "files_api.h"
#include "core/log.h"
#include "core/util.h"
#include "core/settings.h"
#include "crypto/crypto.h"
#include "validate.h"
#include "db/enums.h"

#include <ctype.h>
#include <errno.h>
#include <fcgiapp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char SQL_AGENT_ID[] = "SELECT id FROM agents WHERE user_id = ? AND slug = ?";
static const char SQL_INSERT[] =
	"INSERT INTO files (id, user_id, filename, size_bytes, content_type, scope, status,"
	" description, tags, agent_id, upload_expires_at, created_at, updated_at)"
	" VALUES (?, ?, ?, ?, ?, ?, " AH_SQ(AH_FILE_S_PENDING) ", ?, ?, ?, FROM_UNIXTIME(?), NOW(3), NOW(3))";
static const char SQL_BY_ID[] = "SELECT " AH_FILE_COLS AH_FILE_FROM " WHERE f.id = ?";
static const char SQL_CLAIM[] =
	"UPDATE files SET uploaded = 1, updated_at = NOW(3)"
	" WHERE id = ? AND status = " AH_SQ(AH_FILE_S_PENDING) " AND uploaded = 0";
static const char SQL_UNCLAIM[] = "UPDATE files SET uploaded = 0 WHERE id = ? AND status = " AH_SQ(AH_FILE_S_PENDING);
static const char SQL_CONFIRM[] =
	"UPDATE files SET status = " AH_SQ(AH_FILE_S_CONFIRMED) ", sha256 = ?, uploaded = 0, upload_expires_at = NULL,"
	" updated_at = NOW(3) WHERE id = ?";

/* The MAC'd text of an upload URL: what it may do, to which file, until when. */
static char *url_claim(ah_arena *a, const char *id, long long expires, long long size)
{
	return ah_sprintf(a, "PUT\n%s\n%lld\n%lld", id, expires, size);
}

/* public_url, else the scheme and Host the client used (only host characters). */
static const char *base_url(ah_req *r)
{
	const char *pub = ah_set_opt(ah_settings_of(r->cfg)->api.public_url);
	if (pub)
		return pub;
	const char *host = ah_param_env(r, "HTTP_HOST"), *https = ah_param_env(r, "HTTPS");
	if (!host || !*host || strlen(host) > 255 ||
	    strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") != strlen(host))
		host = "localhost";
	return ah_sprintf(r->arena, "%s://%s", https && *https ? "https" : "http", host);
}

struct presign_in {
	const char *filename, *content_type, *description, *slug, *agent_id;
	char *tags;
	long long size, expires_in;
};

static int presign_input(ah_req *r, json_object *o, struct presign_in *in)
{
	long long max_exp = ah_settings_of(r->cfg)->files.upload_expiry_seconds;
	in->expires_in = max_exp;
	ah_field_str(r, o, "filename", AH_F_REQUIRED, 1, AH_FILENAME_MAX, &in->filename, NULL);
	if (in->filename && ah_filename_problem(in->filename, strlen(in->filename)))
		ah_verr(r, "body", "filename", ah_filename_problem(in->filename, strlen(in->filename)), "value_error");
	ah_field_int(r, o, "size_bytes", AH_F_REQUIRED, 0, 1LL << 50, &in->size, NULL);
	ah_field_str(r, o, "content_type", AH_F_REQUIRED, 1, 255, &in->content_type, NULL);
	if (in->content_type && ah_content_type_problem(in->content_type))
		ah_verr(r, "body", "content_type", ah_content_type_problem(in->content_type), "value_error");
	ah_field_str(r, o, "description", AH_F_NULLABLE, 0, AH_DESCRIPTION_MAX, &in->description, NULL);
	ah_field_str(r, o, "agent_slug", AH_F_NULLABLE, 1, 63, &in->slug, NULL);
	if (in->slug && !ah_slug_valid(in->slug))
		ah_verr(r, "body", "agent_slug", "Not a valid agent slug", "value_error");
	ah_field_int(r, o, "expires_in_seconds", 0, 1, max_exp, &in->expires_in, NULL);
	json_object *t;
	in->tags = "";
	if (json_object_object_get_ex(o, "tags", &t)) {
		const char *csv = json_object_is_type(t, json_type_string) ? json_object_get_string(t) : NULL;
		const char *why = csv ? ah_tags_parse(r->arena, csv, &in->tags) : "Tags should be a comma-separated string";
		if (why)
			ah_verr(r, "body", "tags", why, "value_error");
	}
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	if (in->slug) {
		ah_rows rows;
		if (ah_db_query(r->db, r->arena, &rows, SQL_AGENT_ID, "ss", r->user->id, in->slug) != 0)
			return AH_EFAIL;
		if (rows.n == 0) {
			ah_reply_error(r, 404, "Agent not found");
			return AH_EDONE;
		}
		in->agent_id = rows.v[0][0];
	}
	return 0;
}

static int presign(ah_req *r)
{
	static const char *const fields[] = {"filename", "size_bytes", "content_type", "description",
	                                     "tags", "agent_slug", "expires_in_seconds", NULL};
	json_object *o;
	struct presign_in in = {0};
	ah_err err;
	int rc = ah_body_object(r, &o, fields);
	if (rc != 0 || (rc = presign_input(r, o, &in)) != 0)
		return rc;
	ah_files_sweep(r);
	rc = ah_quota_reserve(r->db, r->user->id, in.size);
	if (rc == AH_EDENIED)
		return ah_files_quota_reply(r, in.size);
	const char *id = ah_id_new(r->arena, "fil");
	long long expires = (long long)time(NULL) + in.expires_in;
	char *url = NULL;
	if (rc == 0)
		rc = ah_db_exec(r->db, NULL, SQL_INSERT, "sssisssssi", id, r->user->id, in.filename, in.size,
		                in.content_type, in.agent_id ? AH_SCOPE_S_AGENT : AH_SCOPE_S_USER, in.description, in.tags,
		                in.agent_id, expires);
	if (rc != 0) {
		ah_quota_release(r->db, r->user->id, in.size);
		return AH_EFAIL;
	}
	if (ah_store_is_s3(ah_files_store())) {
		if (ah_store_presign_put(ah_files_store(), r->arena, id, (long)in.expires_in, &url, &err) != 0) {
			ah_log_error("presign %s: %s", id, err.msg);
			return AH_EFAIL;
		}
	} else {
		char mac[AH_URL_MAC_HEX];
		ah_crypto_url_mac(mac, url_claim(r->arena, id, expires, in.size));
		url = ah_sprintf(r->arena, "%s/api/v1/files/%s/upload?expires=%lld&signature=%s",
		                 base_url(r), id, expires, mac);
	}
	json_object *out = json_object_new_object();
	ah_json_str(out, "file_id", id);
	ah_json_str(out, "upload_url", url);
	time_t e = (time_t)expires;
	struct tm tm;
	char ts[32];
	gmtime_r(&e, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S.000Z", &tm);
	ah_json_str(out, "expires_at", ts);
	return ah_reply_json(r, 201, out);
}

/* Without nginx's body file (streamed, another front, or none): the body from
 * stdin, at most size bytes of it; AH_ETOOBIG (nothing kept) if it has more. */
static int body_to_file(ah_req *r, long long size, char **path)
{
	int fd;
	ah_err err;
	int rc = ah_store_tmp(ah_files_store(), r->arena, &fd, path, &err);
	if (rc != 0) {
		if (rc != AH_ENOSPACE) /* that one the answer logs */
			ah_log_error("%s", err.msg);
		return rc;
	}
	char buf[65536];
	long long left = size;
	while (rc == 0) {
		/* One byte more than is left is asked for: it tells a longer body. */
		int want = left < (long long)sizeof(buf) ? (int)left + 1 : (int)sizeof(buf);
		int n = FCGX_GetStr(buf, want, r->fcgi->in);
		if (n <= 0)
			break;
		if (n > left) {
			rc = AH_ETOOBIG;
			break;
		}
		left -= n;
		ssize_t w = write(fd, buf, (size_t)n);
		if (w != n) /* a short write to a file: its disk is full */
			rc = w >= 0 ? AH_ENOSPACE : ah_err_disk(errno);
	}
	close(fd);
	if (rc)
		unlink(*path);
	return rc;
}

bool ah_upload_url_signed(ah_req *r, const char *id, long long size, long long *expires)
{
	const char *exp = ah_query_get(r, "expires"), *sig = ah_query_get(r, "signature");
	return exp && sig && ah_parse_ll(expires, exp) == 0 &&
	       ah_crypto_url_mac_ok(sig, url_claim(r->arena, id, *expires, size));
}

/* A refused PUT, or nginx's check of one refused (ah_reply_refusal). */
static int refuse(ah_req *r, int status, const char *detail)
{
	return ah_answered(ah_reply_refusal(r, status, detail));
}

/* What is known before the body: the URL's signature, expiry and single use,
 * and a Content-Length that is the declared size. Answers itself. */
static int check_put(ah_req *r, ah_file *f)
{
	long long e = 0;
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, SQL_BY_ID, "s", r->params[0]) != 0)
		return AH_EFAIL;
	if (rows.n == 1)
		ah_file_fill(f, rows.v[0]);
	if (rows.n != 1 || !ah_upload_url_signed(r, f->id, f->size, &e))
		return refuse(r, 403, "Invalid upload URL");
	if ((long long)time(NULL) > e)
		return refuse(r, 403, "This upload URL has expired");
	if (f->status != AH_FILE_PENDING || f->uploaded)
		return refuse(r, 409, "This upload URL has already been used");
	if (r->content_length < 0)
		return refuse(r, 411, ah_sprintf(r->arena, "Content-Length is required: this upload was"
		                                 " declared with %lld bytes", f->size));
	if (r->content_length != f->size)
		return refuse(r, 400, ah_sprintf(r->arena, "The body has %lld bytes; this upload was"
		                                 " declared with %lld", r->content_length, f->size));
	return 0;
}

static int upload_put(ah_req *r)
{
	ah_file f;
	int rc = check_put(r, &f);
	if (rc != 0)
		return rc;
	if (ah_auth_subrequest(r))
		return ah_reply_no_content(r);
	const char *nginx_file = ah_param_env(r, "REQUEST_BODY_FILE");
	char *path = nginx_file && *nginx_file ? ah_strdup(r->arena, nginx_file) : NULL;
	bool ours = !path;
	if (ours && (rc = body_to_file(r, f.size, &path)) != 0) {
		if (rc == AH_ETOOBIG)
			return ah_reply_error(r, 400, ah_sprintf(r->arena, "The body has more than the %lld bytes"
			                      " this upload was declared with", f.size));
		return rc == AH_ENOSPACE ? ah_storage_full_reply(r, "presigned upload") : AH_EFAIL;
	}
	struct stat st;
	long long got = stat(path, &st) == 0 ? (long long)st.st_size : -1;
	unsigned long long claimed = 0;
	if (got != f.size) {
		rc = ah_answered(ah_reply_error(r, 400, ah_sprintf(r->arena, "The body has %lld bytes; this upload"
		                    " was declared with %lld", got < 0 ? 0 : got, f.size)));
	} else if (ah_db_exec(r->db, &claimed, SQL_CLAIM, "s", f.id) != 0) {
		rc = AH_EFAIL;
	} else if (claimed == 0) {
		rc = ah_answered(ah_reply_error(r, 409, "This upload URL has already been used"));
	} else if (rename(path, ah_store_pending_path(ah_files_store(), r->arena, f.id)) != 0) {
		ah_log_error("upload %s: rename %s: %s", f.id, path, strerror(errno));
		ah_db_exec(r->db, NULL, SQL_UNCLAIM, "s", f.id);
		rc = AH_EFAIL;
	} else {
		path = NULL;
	}
	if (path && ours)
		unlink(path); /* nginx's own file: its "clean" removes it */
	if (rc)
		return rc;
	json_object *out = json_object_new_object();
	ah_json_str(out, "file_id", f.id);
	ah_json_int(out, "size_bytes", f.size);
	ah_json_str(out, "status", "pending");
	return ah_reply_json(r, 200, out);
}

/* The pending bytes as a local file: local backend in place, S3 fetched into tmp/. */
static int pending_bytes(ah_req *r, const ah_file *f, char **path)
{
	const ah_store *s = ah_files_store();
	ah_err err;
	if (!ah_store_is_s3(s)) {
		*path = ah_store_pending_path(s, r->arena, f->id);
		return f->uploaded && access(*path, F_OK) == 0 ? 0 : AH_ENOTFOUND;
	}
	int rc = ah_store_take_pending(s, r->arena, f->id, path, &err);
	if (rc && rc != AH_ENOTFOUND)
		ah_log_error("confirm %s: %s", f->id, err.msg);
	return rc;
}

/* Makes the checked bytes a blob and the record confirmed, in one transaction
 * that first makes sure no one else confirmed or deleted it meanwhile. */
static int confirm_store(ah_req *r, const ah_file *f, const char *sha, const char *src)
{
	ah_file now;
	ah_err err;
	int rc = ah_db_begin(r->db) ? AH_EFAIL : ah_file_get(r->db, r->arena, r->user->id, f->id, true, &now);
	if (rc == 0 && now.status != AH_FILE_PENDING)
		rc = AH_ECONFLICT;
	if (rc == 0 && (rc = ah_blob_ref(r->db, ah_files_store(), sha, f->size, src, f->content_type, &err)) != 0)
		ah_log_error("confirm %s: %s", f->id, err.msg);
	else if (rc == 0)
		rc = ah_db_exec(r->db, NULL, SQL_CONFIRM, "ss", sha, f->id) ? AH_EFAIL : 0;
	if (rc == 0 && ah_db_commit(r->db) != 0)
		rc = AH_EFAIL;
	if (rc)
		ah_db_rollback(r->db);
	return rc;
}

static int confirm(ah_req *r)
{
	static const char *const fields[] = {"sha256_hash", NULL};
	json_object *o;
	const char *want;
	ah_file f;
	int rc = ah_file_load(r, r->params[0], false, &f);
	if (rc != 0 || (rc = ah_body_object(r, &o, fields)) != 0)
		return rc;
	ah_field_str(r, o, "sha256_hash", AH_F_REQUIRED, 64, 64, &want, NULL);
	if (want && strspn(want, "0123456789abcdefABCDEF") != 64)
		ah_verr(r, "body", "sha256_hash", "Should be 64 hexadecimal digits", "value_error");
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	char *lower = ah_strdup(r->arena, want);
	for (char *c = lower; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	if (f.status == AH_FILE_CONFIRMED)
		return f.sha256 && strcmp(f.sha256, lower) == 0
		           ? ah_reply_json(r, 200, ah_file_json(r, &f))
		           : ah_reply_error(r, 409, "The file is already confirmed");
	char *path, sha[65];
	long long size = -1;
	ah_err err;
	rc = pending_bytes(r, &f, &path);
	if (rc == AH_ENOTFOUND)
		return ah_reply_error(r, 400, "Nothing has been uploaded yet: PUT the bytes to upload_url first");
	if (rc != 0 || ah_file_sha256(path, sha, &size, &err) != 0)
		return AH_EFAIL;
	if (size != f.size || strcmp(sha, lower) != 0) {
		unlink(path);
		ah_store_drop_pending(ah_files_store(), r->arena, f.id);
		ah_db_exec(r->db, NULL, SQL_UNCLAIM, "s", f.id);
		return ah_reply_error(r, 400, size != f.size
			? ah_sprintf(r->arena, "The upload has %lld bytes, not the declared %lld; the bytes"
			             " were discarded", size, f.size)
			: "The upload's SHA-256 is not sha256_hash; the bytes were discarded");
	}
	rc = confirm_store(r, &f, sha, path);
	if (rc == AH_ECONFLICT)
		return ah_reply_error(r, 409, "The file is no longer pending");
	if (rc)
		return AH_EFAIL;
	if (ah_store_is_s3(ah_files_store()))
		ah_store_drop_pending(ah_files_store(), r->arena, f.id);
	return ah_file_reply(r, 200, f.id);
}

const ah_route ah_file_presign_routes[] = {
	{"POST", "/files/{id}/confirm", confirm, 0, 0, NULL},
	{"POST", "/files/presigned-upload", presign, 0, 0, NULL},
	{"PUT", "/files/{id}/upload", upload_put, AH_R_PUBLIC | AH_R_STREAM, 0, NULL},
	{NULL, NULL, NULL, 0, 0, NULL},
};
