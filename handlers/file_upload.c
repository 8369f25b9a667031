/* Uploads: POST /files (multipart, ≤ 10 MB) and the presigned upload
 * (POST /files/presigned-upload → PUT upload_url → POST /files/{id}/confirm).
 *
 * POST /files parses the multipart body as it streams in from FastCGI stdin
 * (http/multipart.c) into a temporary file beside the blobs, hashing while it
 * writes; the worker holds 64 KiB of it at a time, and nginx's request
 * buffering already keeps slow clients off the worker. We chose this over
 * nginx's client_body_in_file_only here because the body is multipart: a
 * worker handed nginx's file would still have to read it all to find the
 * part, then copy the part out. The presigned PUT is a bare body, so there
 * nginx writes it to a file (client_body_in_file_only) and the worker only
 * renames it: see upload_put. */
#include "files_api.h"
#include "core/log.h"
#include "core/util.h"
#include "db/enums.h"
#include "validate.h"

#include <errno.h>
#include <fcgiapp.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The multipart envelope and the small fields around a 10 MB file. */
#define POST_BODY_MAX (AH_FILES_POST_MAX + 256 * 1024)
#define FIELD_MAX (AH_DESCRIPTION_MAX * 4 + 1)
#define STOP 1 /* a sink's "answer already decided" (errors recorded in the request) */

static const char SQL_AGENT_ID[] = "SELECT id FROM agents WHERE user_id = ? AND slug = ?";
static const char SQL_INSERT[] =
	"INSERT INTO files (id, user_id, filename, size_bytes, content_type, scope, status,"
	" description, tags, sha256, agent_id, session_id, upload_expires_at, created_at, updated_at)"
	" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, FROM_UNIXTIME(?), NOW(3), NOW(3))";
/* (upload_expires_at: NULL, bound as a NULL string, for confirmed uploads.) */

struct upload {
	ah_req *r;
	int fd;
	char *tmp;                       /* NULL once consumed or removed */
	crypto_hash_sha256_state sha;
	long long size;
	bool have_file, in_file;
	char filename[AH_MP_FILENAME_MAX + 1], content_type[256];
	char *field;                     /* the field being read: one of the buffers below */
	size_t *field_len;
	bool have[3];
	char desc[FIELD_MAX], tags[FIELD_MAX], slug[256];
	size_t desc_len, tags_len, slug_len;
	bool too_long;
};

static const char *const FIELD_NAMES[] = {"description", "tags", "agent_slug"};

static int part_begin(void *ud, const ah_mp_part *p)
{
	struct upload *u = ud;
	u->in_file = false;
	u->field = NULL;
	if (strcmp(p->name, "file") == 0) {
		if (u->have_file)
			ah_verr(u->r, "body", "file", "Only one file part is allowed", "value_error");
		else if (!p->has_filename)
			ah_verr(u->r, "body", "file", "The file part needs a filename", "value_error");
		else if (p->filename_bad)
			ah_verr(u->r, "body", "file", "Filename too long or not decodable", "value_error");
		else if (ah_filename_problem(p->filename, p->filename_len))
			ah_verr(u->r, "body", "file", ah_filename_problem(p->filename, p->filename_len), "value_error");
		else if (p->content_type_long || (*p->content_type && ah_content_type_problem(p->content_type)))
			ah_verr(u->r, "body", "file", "The file part's Content-Type is not a media type", "value_error");
		else {
			u->have_file = u->in_file = true;
			memcpy(u->filename, p->filename, p->filename_len + 1);
			snprintf(u->content_type, sizeof(u->content_type), "%s",
			         *p->content_type ? p->content_type : "application/octet-stream");
			return 0;
		}
		return STOP;
	}
	char *bufs[] = {u->desc, u->tags, u->slug};
	size_t *lens[] = {&u->desc_len, &u->tags_len, &u->slug_len};
	for (int i = 0; i < 3; i++) {
		if (strcmp(p->name, FIELD_NAMES[i]) != 0)
			continue;
		if (u->have[i] || p->has_filename) {
			ah_verr(u->r, "body", FIELD_NAMES[i], "Expected one plain form field", "value_error");
			return STOP;
		}
		u->have[i] = true;
		u->field = bufs[i];
		u->field_len = lens[i];
		return 0;
	}
	ah_verr(u->r, "body", *p->name ? p->name : NULL, "Extra inputs are not permitted", "extra_forbidden");
	return STOP;
}

static int part_data(void *ud, const char *buf, size_t n)
{
	struct upload *u = ud;
	if (u->in_file) {
		u->size += (long long)n;
		if (u->size > AH_FILES_POST_MAX)
			return AH_ETOOBIG;
		crypto_hash_sha256_update(&u->sha, (const unsigned char *)buf, n);
		ssize_t w = write(u->fd, buf, n);
		if (w == (ssize_t)n)
			return 0;
		/* A short write to a file: its disk is full. */
		return w >= 0 ? AH_ENOSPACE : ah_err_disk(errno);
	}
	size_t cap = u->field == u->slug ? sizeof(u->slug) : FIELD_MAX;
	if (*u->field_len + n >= cap) {
		u->too_long = true;
		return 0;
	}
	memcpy(u->field + *u->field_len, buf, n);
	*u->field_len += n;
	u->field[*u->field_len] = '\0';
	return 0;
}

static int part_end(void *ud)
{
	(void)ud;
	return 0;
}

static ssize_t read_stdin(void *src, char *buf, size_t n)
{
	ah_req *r = src;
	return FCGX_GetStr(buf, (int)n, r->fcgi->in);
}

static int too_big(ah_req *r)
{
	return ah_reply_error(r, 413, "File too large for POST /files (limit 10485760 bytes);"
	                      " use POST /files/presigned-upload for larger files");
}

static void remove_tmp(void *p)
{
	struct upload *u = p;
	if (u->fd >= 0)
		close(u->fd);
	if (u->tmp)
		unlink(u->tmp);
}

/* A refused upload's bytes go before its answer does: the arena's cleanup
 * runs after the reply has left, which a client could see first. */
static void drop_tmp(struct upload *u)
{
	remove_tmp(u);
	u->fd = -1;
	u->tmp = NULL;
}

/* Checks the small fields; 422 entries recorded. Sets *agent_id for agent_slug. */
static int check_fields(ah_req *r, struct upload *u, char **tags, const char **agent_id)
{
	*agent_id = NULL;
	if (u->too_long)
		ah_verr(r, "body", NULL, "A form field is too long", "string_too_long");
	if (!u->have_file)
		ah_verr(r, "body", "file", "Field required", "missing");
	if (u->have[0] && (strlen(u->desc) != u->desc_len || !ah_utf8_valid(u->desc, u->desc_len)))
		ah_verr(r, "body", "description", "Description must be UTF-8 text", "value_error");
	const char *why = u->have[1] ? ah_tags_parse(r->arena, u->tags, tags) : NULL;
	if (!u->have[1])
		*tags = "";
	if (why)
		ah_verr(r, "body", "tags", why, "value_error");
	if (u->have[2] && !ah_slug_valid(u->slug))
		ah_verr(r, "body", "agent_slug", "Not a valid agent slug", "value_error");
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	if (u->have[2]) {
		ah_rows rows;
		if (ah_db_query(r->db, r->arena, &rows, SQL_AGENT_ID, "ss", r->user->id, u->slug) != 0)
			return AH_EFAIL;
		if (rows.n == 0)
			return ah_answered(ah_reply_error(r, 404, "Agent not found"));
		*agent_id = rows.v[0][0];
	}
	return 0;
}

/* Blob, record and nothing else, in one transaction. The quota is reserved
 * by the caller beforehand (its own statement). */
static int store_upload(ah_req *r, struct upload *u, const char *id, const char *sha,
                        const char *tags, const char *agent_id)
{
	ah_err err;
	int rc = ah_db_begin(r->db);
	const char *src = u->tmp;
	u->tmp = NULL; /* ah_blob_ref consumes it whatever happens */
	if (rc == 0 && (rc = ah_blob_ref(r->db, ah_files_store(), sha, u->size, src, u->content_type,
	                                 &err)) != 0)
		ah_log_error("storing %s: %s", id, err.msg);
	if (rc == 0)
		rc = ah_db_exec(r->db, NULL, SQL_INSERT, "sssissssssss", id, r->user->id, u->filename,
		                u->size, u->content_type, agent_id ? AH_SCOPE_S_AGENT : AH_SCOPE_S_USER, AH_FILE_S_CONFIRMED,
		                u->have[0] ? u->desc : NULL, tags, sha, agent_id, (const char *)NULL);
	if (rc == 0)
		rc = ah_db_commit(r->db);
	if (rc) {
		ah_db_rollback(r->db);
		unlink(src);
	}
	return rc;
}

static int post_file(ah_req *r)
{
	const char *boundary = ah_multipart_boundary(r->arena, r->content_type);
	if (!boundary)
		return ah_reply_error(r, 415, "Content-Type must be multipart/form-data with a boundary");
	if (r->content_length > POST_BODY_MAX)
		return too_big(r);
	struct upload *u = ah_alloc(r->arena, sizeof(*u));
	ah_err err;
	u->r = r;
	u->fd = -1;
	int rc = ah_store_tmp(ah_files_store(), r->arena, &u->fd, &u->tmp, &err);
	if (rc != 0) {
		if (rc == AH_ENOSPACE)
			return ah_storage_full_reply(r, "file upload");
		ah_log_error("%s", err.msg);
		return AH_EFAIL;
	}
	ah_arena_on_cleanup(r->arena, remove_tmp, u);
	crypto_hash_sha256_init(&u->sha);
	char why[256] = "";
	ah_mp_sink sink = {part_begin, part_data, part_end};
	rc = ah_multipart_parse(read_stdin, r, boundary, &sink, u, why, sizeof(why));
	if (rc == 0 && fsync(u->fd) != 0)
		rc = ah_err_disk(errno);
	if (rc != 0)
		drop_tmp(u);
	if (rc == AH_ENOSPACE)
		return ah_storage_full_reply(r, "file upload");
	if (rc == AH_ETOOBIG)
		return too_big(r);
	if (rc == AH_EINVALID)
		ah_verr(r, "body", NULL, why, "multipart_invalid");
	if (rc == AH_EINVALID || rc == STOP)
		return ah_verr_reply(r);
	if (rc != 0)
		return AH_EFAIL;
	char *tags;
	const char *agent_id;
	if ((rc = check_fields(r, u, &tags, &agent_id)) != 0) {
		drop_tmp(u);
		return rc;
	}
	unsigned char d[crypto_hash_sha256_BYTES];
	char sha[65];
	crypto_hash_sha256_final(&u->sha, d);
	sodium_bin2hex(sha, sizeof(sha), d, sizeof(d));
	rc = ah_quota_reserve(r->db, r->user->id, u->size);
	if (rc == AH_EDENIED) {
		drop_tmp(u);
		return ah_files_quota_reply(r, u->size);
	}
	const char *id = ah_id_new(r->arena, "fil");
	if (rc == 0 && (rc = store_upload(r, u, id, sha, tags, agent_id)) != 0)
		ah_quota_release(r->db, r->user->id, u->size);
	return rc ? AH_EFAIL : ah_file_reply(r, 201, id);
}

const ah_route ah_file_upload_routes[] = {
	{"POST", "/files", post_file, AH_R_STREAM, POST_BODY_MAX, NULL},
	{NULL, NULL, NULL, 0, 0, NULL},
};
