/* /buckets: the customer's own object storage (s3, gcs, r2), to be mounted
 * into agents' sandboxes (handlers/mounts.c). Credentials are set and checked
 * by bucket_access.c; this file never reads them. Endpoint rules are
 * lib/buckets' (the runner applies the same ones). */
#include "buckets_api.h"
#include "list.h"
#include "routes.h"
#include "slug.h"
#include "validate.h"
#include "core/util.h"
#include "db/record.h"

#include <string.h>

#define BUCKET_COLS                                                                   \
	"b.id, b.name, b.slug, b.provider, b.bucket_name, b.region, b.endpoint_url,"      \
	" (b.cred_sealed IS NOT NULL), b.created_at, b.updated_at"

_Static_assert(sizeof(ah_provider) == sizeof(int), "AH_COL_ENUM fields are ints");

static const ah_col BUCKET_COLUMNS[] = {
	AH_COL_S("b.id", ah_bucket, id),
	AH_COL_S("b.name", ah_bucket, name),
	AH_COL_S("b.slug", ah_bucket, slug),
	AH_COL_E("b.provider", ah_bucket, provider, ah_provider_names, AH_PROVIDER_S3),
	AH_COL_S("b.bucket_name", ah_bucket, bucket_name),
	AH_COL_S("b.region", ah_bucket, region),
	AH_COL_S("b.endpoint_url", ah_bucket, endpoint_url),
	AH_COL_B("(b.cred_sealed IS NOT NULL)", ah_bucket, has_credentials),
	AH_COL_S("b.created_at", ah_bucket, created_at),
	AH_COL_S("b.updated_at", ah_bucket, updated_at),
};
#define BUCKET_NCOLS (sizeof(BUCKET_COLUMNS) / sizeof(BUCKET_COLUMNS[0]))

static const char SQL_LIST[] =
	"SELECT " BUCKET_COLS " FROM buckets b WHERE b.user_id = ?"
	" ORDER BY b.created_at DESC, b.id DESC LIMIT ? OFFSET ?";
static const char SQL_COUNT[] = "SELECT COUNT(*) FROM buckets WHERE user_id = ?";
static const char SQL_GET[] = "SELECT " BUCKET_COLS " FROM buckets b WHERE b.user_id = ? AND b.slug = ?";
static const char SQL_GET_ID[] = "SELECT " BUCKET_COLS " FROM buckets b WHERE b.id = ?";
static const char SQL_SLUG_TAKEN[] = "SELECT 1 FROM buckets WHERE user_id = ? AND slug = ?";
static const char SQL_INSERT[] =
	"INSERT INTO buckets (id, user_id, name, slug, provider, bucket_name, region, endpoint_url,"
	" created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NOW(3), NOW(3))";
static const char SQL_UPDATE[] =
	"UPDATE buckets SET name = ?, slug = ?, provider = ?, bucket_name = ?, region = ?,"
	" endpoint_url = ?, updated_at = NOW(3) WHERE id = ?";
/* Credentials of one provider family mean nothing to the other. */
static const char SQL_DROP_CREDS[] =
	"UPDATE buckets SET cred_nonce = NULL, cred_sealed = NULL WHERE id = ?";
static const char SQL_MOUNTERS[] =
	"SELECT DISTINCT a.slug FROM mounts m JOIN agents a ON a.id = m.agent_id"
	" WHERE m.bucket_id = ? ORDER BY a.slug";
static const char SQL_FLAG[] =
	"UPDATE agents a JOIN mounts m ON m.agent_id = a.id SET a.needs_redeploy = 1,"
	" a.updated_at = NOW(3) WHERE m.bucket_id = ?";
static const char SQL_DROP_MOUNTS[] = "DELETE FROM mounts WHERE bucket_id = ?";
static const char SQL_DELETE[] = "DELETE FROM buckets WHERE id = ?";

static const ah_bucket *parse(ah_req *r, char *const *row)
{
	static bool checked;
	AH_RECORD_CHECK(checked, BUCKET_COLUMNS, BUCKET_NCOLS, BUCKET_COLS);
	ah_bucket *b = ah_alloc(r->arena, sizeof(*b));
	ah_record_fill(b, BUCKET_COLUMNS, BUCKET_NCOLS, row);
	return b;
}

int ah_bucket_find(ah_req *r, const char *slug, const ah_bucket **out)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, SQL_GET, "ss", r->user->id, slug) != 0)
		return AH_EFAIL;
	if (rows.n == 0)
		return AH_ENOTFOUND;
	*out = parse(r, rows.v[0]);
	return 0;
}

int ah_bucket_flag_agents(ah_req *r, const char *bucket_id)
{
	return ah_db_exec(r->db, NULL, SQL_FLAG, "s", bucket_id);
}

int ah_bucket_load(ah_req *r, const ah_bucket **out)
{
	int rc = ah_bucket_find(r, r->params[0], out);
	return rc == AH_ENOTFOUND ? ah_reply_error(r, 404, "Bucket not found") : rc;
}

static json_object *bucket_json(ah_req *r, const ah_bucket *b)
{
	json_object *o = json_object_new_object();
	ah_json_str(o, "id", b->id);
	ah_json_str(o, "name", b->name);
	ah_json_str(o, "slug", b->slug);
	ah_json_str(o, "provider", ah_provider_names[b->provider]);
	ah_json_str(o, "bucket_name", b->bucket_name);
	ah_json_str(o, "region", b->region);
	ah_json_str(o, "endpoint_url", b->endpoint_url);
	ah_json_bool(o, "has_credentials", b->has_credentials);
	ah_json_time(r, o, "created_at", b->created_at);
	ah_json_time(r, o, "updated_at", b->updated_at);
	return o;
}

static int reply_by_id(ah_req *r, int status, const char *id)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, SQL_GET_ID, "s", id) != 0 || rows.n != 1)
		return AH_EFAIL;
	return ah_reply_json(r, status, bucket_json(r, parse(r, rows.v[0])));
}

/* ---- input ---- */

typedef struct bucket_in {
	const char *name, *slug, *provider, *bucket_name, *region, *endpoint_url;
	bool has_name, has_slug, has_provider, has_bucket, has_region, has_endpoint;
} bucket_in;

static const char *const BUCKET_FIELDS[] = {"name", "slug", "provider", "bucket_name", "region",
                                            "endpoint_url", NULL};
/* Creation also takes the credentials, in one call (as /credentials takes them). */
static const char *const CREATE_FIELDS[] = {"name", "slug", "provider", "bucket_name", "region",
                                            "endpoint_url", "access_key_id", "secret_access_key",
                                            "service_account_json", NULL};

static void check_fields(ah_req *r, json_object *o, bucket_in *in, bool create)
{
	unsigned req = create ? AH_F_REQUIRED : 0;
	ah_field_str(r, o, "name", req, 1, 255, &in->name, &in->has_name);
	if (ah_field_str(r, o, "slug", create ? AH_F_NULLABLE : 0, 1, 63, &in->slug, &in->has_slug) == 0 &&
	    in->slug && !ah_slug_valid(in->slug))
		ah_verr(r, "body", "slug", "String should match pattern '^[a-z0-9]+(-[a-z0-9]+)*$'",
		        "string_pattern_mismatch");
	if (ah_field_str(r, o, "provider", req, 1, 16, &in->provider, &in->has_provider) == 0 &&
	    in->provider && ah_enum_find(ah_provider_names, in->provider) < 0)
		ah_verr(r, "body", "provider", "Input should be 's3', 'gcs' or 'r2'", "enum");
	if (ah_field_str(r, o, "bucket_name", req, 3, 222, &in->bucket_name, &in->has_bucket) == 0 &&
	    in->bucket_name && !ah_bucket_name_valid(in->bucket_name))
		ah_verr(r, "body", "bucket_name", "Input should be a bucket name: lowercase letters, "
		        "digits, '.', '-' and '_', starting and ending with a letter or digit",
		        "string_pattern_mismatch");
	if (ah_field_str(r, o, "region", AH_F_NULLABLE, 1, 64, &in->region, &in->has_region) == 0 &&
	    in->region && !ah_bucket_region_valid(in->region))
		ah_verr(r, "body", "region", "String should match pattern '^[a-z0-9-]{1,64}$'",
		        "string_pattern_mismatch");
	ah_err err;
	ah_addr_policy pol = ah_bucket_policy(r->cfg);
	if (ah_field_str(r, o, "endpoint_url", AH_F_NULLABLE, 1, 2048, &in->endpoint_url,
	                 &in->has_endpoint) == 0 && in->endpoint_url &&
	    ah_bucket_endpoint_check(in->endpoint_url, &pol, true, &err) != 0)
		ah_verr(r, "body", "endpoint_url", err.msg, "url_parsing");
}

/* Rules across fields, on the values the bucket will have: r2 needs an
 * endpoint; an S3 endpoint names no path (a GCS one may: Go clients write
 * https://host/storage/v1). */
static void check_combination(ah_req *r, const char *provider, const char *endpoint)
{
	ah_err err;
	static const ah_addr_policy any = {.allow_private = true}; /* checked above */
	if (strcmp(provider, "r2") == 0 && !endpoint)
		ah_verr(r, "body", "endpoint_url", "Field required for r2 buckets (your account's "
		        "https://<account id>.r2.cloudflarestorage.com)", "missing");
	else if (endpoint && strcmp(provider, "gcs") != 0 &&
	         ah_bucket_endpoint_check(endpoint, &any, false, &err) != 0)
		ah_verr(r, "body", "endpoint_url", err.msg, "url_parsing");
}

/* ---- handlers ---- */

static json_object *bucket_row_json(ah_req *r, const ah_rows *rows, size_t i)
{
	return bucket_json(r, parse(r, rows->v[i]));
}

static int list_buckets(ah_req *r)
{
	return ah_list_reply(r, SQL_COUNT, SQL_LIST, r->user->id, bucket_row_json);
}

/* The row, with credentials when given, in one transaction: a derived slug
 * taken meanwhile (as for agents) is derived again. */
static int insert_bucket(ah_req *r, const bucket_in *in, const char *id, const ah_bucket_creds *c,
                         const char **slug)
{
	int rc = ah_db_begin(r->db);
	for (int attempt = 0; rc == 0 || (rc == AH_ECONFLICT && attempt < (in->slug ? 1 : 5)); attempt++) {
		if (!in->slug && ah_slug_free(r, SQL_SLUG_TAKEN, in->name, "bucket", slug) != 0) {
			rc = AH_EFAIL;
			break;
		}
		rc = ah_db_exec(r->db, NULL, SQL_INSERT, "ssssssss", id, r->user->id, in->name, *slug,
		                in->provider, in->bucket_name, in->region, in->endpoint_url);
		if (rc != AH_ECONFLICT)
			break;
	}
	if (rc == 0 && c)
		rc = ah_bucket_creds_store(r, id, c);
	if (rc == 0)
		rc = ah_db_commit(r->db);
	if (rc != 0)
		ah_db_rollback(r->db);
	return rc;
}

static int create_bucket(ah_req *r)
{
	json_object *o;
	bucket_in in = {0};
	ah_bucket_creds c;
	bool any = false;
	if (ah_body_object(r, &o, CREATE_FIELDS) != 0)
		return AH_EDONE;
	check_fields(r, o, &in, true);
	if (!r->errors) {
		check_combination(r, in.provider, in.endpoint_url);
		ah_bucket_creds_fields(r, o, (ah_provider)ah_enum_find(ah_provider_names, in.provider),
		                       false, &c, &any);
	}
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	const char *slug = in.slug, *id = ah_id_new(r->arena, "bkt");
	int rc = insert_bucket(r, &in, id, any ? &c : NULL, &slug);
	if (rc == AH_ECONFLICT)
		return ah_reply_error(r, 409, ah_sprintf(r->arena, "Slug '%s' is already taken", slug));
	return rc ? rc : reply_by_id(r, 201, id);
}

static int get_bucket(ah_req *r)
{
	const ah_bucket *b;
	int rc = ah_bucket_load(r, &b);
	return rc ? rc : ah_reply_json(r, 200, bucket_json(r, b));
}

static int patch_bucket(ah_req *r)
{
	const ah_bucket *b;
	json_object *o;
	bucket_in in = {0};
	int rc = ah_bucket_load(r, &b);
	if (rc != 0 || (rc = ah_body_object(r, &o, BUCKET_FIELDS)) != 0)
		return rc;
	check_fields(r, o, &in, false);
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	const char *old = ah_provider_names[b->provider];
	const char *provider = in.has_provider ? in.provider : old;
	const char *endpoint = in.has_endpoint ? in.endpoint_url : b->endpoint_url;
	check_combination(r, provider, endpoint);
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	bool family = (strcmp(provider, "gcs") == 0) != (b->provider == AH_PROVIDER_GCS);
	if (ah_db_begin(r->db) != 0)
		return AH_EFAIL;
	rc = ah_db_exec(r->db, NULL, SQL_UPDATE, "sssssss", in.has_name ? in.name : b->name,
	                in.has_slug ? in.slug : b->slug, provider,
	                in.has_bucket ? in.bucket_name : b->bucket_name,
	                in.has_region ? in.region : b->region, endpoint, b->id);
	if (rc == 0 && family)
		rc = ah_db_exec(r->db, NULL, SQL_DROP_CREDS, "s", b->id);
	/* What the runner's rclone is given changed: the agents' next deploy applies it. */
	if (rc == 0)
		rc = ah_bucket_flag_agents(r, b->id);
	if (rc == 0)
		rc = ah_db_commit(r->db);
	if (rc != 0)
		ah_db_rollback(r->db);
	if (rc == AH_ECONFLICT)
		return ah_reply_error(r, 409, ah_sprintf(r->arena, "Slug '%s' is already taken", in.slug));
	return rc ? rc : reply_by_id(r, 200, b->id);
}

/* "a, b and c" of the agents' slugs. */
static const char *agent_list(ah_req *r, const ah_rows *rows)
{
	const char *s = "";
	for (size_t i = 0; i < rows->n; i++)
		s = ah_sprintf(r->arena, "%s%s'%s'", s,
		               i == 0 ? "" : (i + 1 == rows->n ? " and " : ", "), rows->v[i][0]);
	return s;
}

static int delete_bucket(ah_req *r)
{
	const ah_bucket *b;
	ah_rows users;
	int rc = ah_bucket_load(r, &b);
	if (rc != 0)
		return rc;
	const char *force = ah_query_get(r, "force");
	bool forced = force && (strcmp(force, "true") == 0 || strcmp(force, "1") == 0);
	if (force && !forced && strcmp(force, "false") != 0 && strcmp(force, "0") != 0) {
		ah_verr(r, "query", "force", "Input should be a valid boolean", "bool_parsing");
		return ah_verr_reply(r);
	}
	if (ah_db_query(r->db, r->arena, &users, SQL_MOUNTERS, "s", b->id) != 0)
		return AH_EFAIL;
	if (users.n > 0 && !forced)
		return ah_reply_error(r, 409, ah_sprintf(r->arena, "Bucket is mounted by agent%s %s; "
		                      "remove those mounts first, or delete with ?force=true to remove "
		                      "them too", users.n == 1 ? "" : "s", agent_list(r, &users)));
	if (ah_db_begin(r->db) != 0)
		return AH_EFAIL;
	if (ah_bucket_flag_agents(r, b->id) != 0 || ah_db_exec(r->db, NULL, SQL_DROP_MOUNTS, "s", b->id) ||
	    ah_db_exec(r->db, NULL, SQL_DELETE, "s", b->id) != 0 || ah_db_commit(r->db) != 0) {
		ah_db_rollback(r->db);
		return AH_EFAIL;
	}
	return ah_reply_no_content(r);
}

const ah_route ah_buckets_routes[] = {
	{"GET", "/buckets", list_buckets, 0, 0},
	{"POST", "/buckets", create_bucket, 0, 0},
	{"GET", "/buckets/{slug}", get_bucket, 0, 0},
	{"PATCH", "/buckets/{slug}", patch_bucket, 0, 0},
	{"DELETE", "/buckets/{slug}", delete_bucket, 0, 0},
	{NULL, NULL, NULL, 0, 0},
};
