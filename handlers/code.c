/* PUT /agents/{slug}/code: the gzip tarball of a `local` agent's project, streamed
 * to <data_dir>/code/<agent id>.tar.gz. It is written to a temporary file and
 * renamed into place only once complete, so a failed upload never replaces good
 * code. The runner unpacks and checks it at deploy time. A copy goes into the
 * file store under its SHA-256, for a runner on another machine (whose
 * data_dir this host's upload never reached: docs/cluster.md). */
#include "agents.h"
#include "files_api.h"
#include "code.h"
#include "routes.h"
#include "core/log.h"
#include "core/util.h"

#include <errno.h>
#include <fcgiapp.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define CODE_LIMIT (50LL * 1024 * 1024)

static const char SQL_SET_CODE[] =
	"UPDATE agents SET code_sha256 = ?, code_size = ?, code_uploaded_at = NOW(3),"
	" needs_redeploy = (deployed_at IS NOT NULL), updated_at = NOW(3) WHERE id = ?";
static const char SQL_CODE_LOCK[] = "SELECT code_sha256 FROM agents WHERE id = ? FOR UPDATE";
static const char SQL_GET_CODE[] =
	"SELECT code_sha256, code_size, code_uploaded_at FROM agents WHERE id = ?";

static const char *code_dir(ah_req *r)
{
	return ah_sprintf(r->arena, "%s/code", ah_settings_of(r->cfg)->host.data_dir);
}

void ah_code_remove(ah_req *r, const char *agent_id)
{
	unlink(ah_sprintf(r->arena, "%s/%s.tar.gz", code_dir(r), agent_id));
}

void ah_code_release(ah_req *r, const char *sha)
{
	ah_err err = {0};
	if (sha && *sha && ah_blob_drop(r->db, ah_files_store(), sha, &err) != 0)
		ah_log_warn("blob %.12s left in the file store: %s", sha, err.msg);
}

static bool is_gzip_type(const char *ct)
{
	if (!ct)
		return false;
	size_t n = strcspn(ct, "; ");
	return (n == 16 && strncasecmp(ct, "application/gzip", n) == 0) ||
	       (n == 18 && strncasecmp(ct, "application/x-gzip", n) == 0) ||
	       (n == 24 && strncasecmp(ct, "application/octet-stream", n) == 0);
}

/* Streams the body to fd while hashing. Fills hex and *size. */
static int stream_body(ah_req *r, int fd, char hex[65], long long *size)
{
	crypto_hash_sha256_state st;
	unsigned char digest[crypto_hash_sha256_BYTES], magic[2] = {0, 0};
	char buf[64 * 1024];
	int n;
	crypto_hash_sha256_init(&st);
	*size = 0;
	while ((n = FCGX_GetStr(buf, sizeof(buf), r->fcgi->in)) > 0) {
		if (*size < 2)
			memcpy(magic + *size, buf, (size_t)(n < 2 - *size ? n : 2 - *size));
		*size += n;
		if (*size > CODE_LIMIT)
			return AH_ETOOBIG;
		crypto_hash_sha256_update(&st, (unsigned char *)buf, (size_t)n);
		if (write(fd, buf, (size_t)n) != n)
			return ah_err_disk(errno);
	}
	crypto_hash_sha256_final(&st, digest);
	sodium_bin2hex(hex, 65, digest, sizeof(digest));
	/* Cheap early check; the runner validates the whole archive at deploy. */
	return (*size >= 2 && magic[0] == 0x1f && magic[1] == 0x8b) ? 0 : AH_EINVALID;
}

static int answer_upload_error(ah_req *r, int rc)
{
	if (rc == AH_ETOOBIG)
		return ah_reply_error(r, 413, "Request body too large (limit 52428800 bytes)");
	if (rc == AH_EINVALID)
		return ah_reply_error(r, 400, "The body is not a gzip file; upload a .tar.gz of the project");
	if (rc == AH_ENOSPACE)
		return ah_storage_full_reply(r, "code upload");
	return AH_EFAIL;
}

/* The uploaded tarball into the file store too, for runners on other
 * machines (docs/cluster.md), with a reference of the agent's own in
 * file_blobs (a file of the same bytes deleted never takes it away); the
 * reference of the code it replaces is dropped once the agent names the new. */
static int store_copy(ah_req *r, const char *path, const char *sha, long long size)
{
	const ah_store *s = ah_files_store();
	ah_err err = {0};
	char *tmp = NULL;
	int rc = ah_store_tmp_copy(s, r->arena, path, &tmp, &err);
	if (rc == 0)
		rc = ah_blob_keep(r->db, s, sha, size, tmp, "application/gzip", &err); /* consumes tmp */
	if (tmp)
		unlink(tmp); /* when it failed before placing it */
	if (rc != 0)
		ah_log_error("uploaded code %.12s not kept in the file store: %s", sha, err.msg);
	return rc;
}

/* The agent's code set to hex in a transaction that reads what it replaces
 * (*old, released after by the caller): of two uploads at once each
 * releases the code it replaced, never both the same. */
static int set_code(ah_req *r, const char *agent_id, const char *hex, long long size,
                    const char **old)
{
	ah_rows rows;
	if (ah_db_begin(r->db) != 0)
		return AH_EFAIL;
	if (ah_db_query(r->db, r->arena, &rows, SQL_CODE_LOCK, "s", agent_id) != 0 || rows.n != 1 ||
	    ah_db_exec(r->db, NULL, SQL_SET_CODE, "sis", hex, size, agent_id) != 0 ||
	    ah_db_commit(r->db) != 0) {
		ah_db_rollback(r->db);
		return AH_EFAIL;
	}
	*old = ah_cell(&rows, 0, 0);
	return 0;
}

static int put_code(ah_req *r)
{
	const ah_agent *a;
	int rc = ah_agent_load(r, &a);
	if (rc != 0)
		return rc;
	if (a->source_type != AH_SOURCE_LOCAL)
		return ah_reply_error(r, 400, "Code uploads are for agents with source_type 'local'");
	if (!is_gzip_type(r->content_type))
		return ah_reply_error(r, 415, "Content-Type must be application/gzip");
	if (r->content_length > CODE_LIMIT)
		return answer_upload_error(r, AH_ETOOBIG);
	const char *dir = code_dir(r);
	mkdir(dir, 0700);
	char *tmp = ah_sprintf(r->arena, "%s/.upload-XXXXXX", dir);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		ah_log_error("cannot create %s: %s", tmp, strerror(errno));
		return answer_upload_error(r, ah_err_disk(errno));
	}
	char hex[65];
	long long size;
	rc = stream_body(r, fd, hex, &size);
	if (rc == 0 && fsync(fd) != 0)
		rc = ah_err_disk(errno);
	close(fd);
	const char *dest = ah_sprintf(r->arena, "%s/%s.tar.gz", dir, a->id);
	if (rc == 0)
		rc = store_copy(r, tmp, hex, size);
	if (rc == 0 && rename(tmp, dest) != 0)
		rc = AH_EFAIL;
	if (rc != 0) {
		unlink(tmp);
		return answer_upload_error(r, rc);
	}
	ah_rows rows;
	const char *old;
	if (set_code(r, a->id, hex, size, &old) != 0 ||
	    ah_db_query(r->db, r->arena, &rows, SQL_GET_CODE, "s", a->id) != 0 || rows.n != 1)
		return AH_EFAIL;
	ah_code_release(r, old);
	json_object *o = json_object_new_object();
	ah_json_str(o, "sha256", hex);
	ah_json_int(o, "size", size);
	ah_json_time(r, o, "uploaded_at", rows.v[0][2]);
	return ah_reply_json(r, 200, o);
}

const ah_route ah_code_routes[] = {
	{"PUT", "/agents/{slug}/code", put_code, AH_R_STREAM, 50 * 1024 * 1024, AH_AGENT_SCOPE},
	{NULL, NULL, NULL, 0, 0},
};
