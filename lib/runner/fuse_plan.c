/* The deploy's half of bucket mounts (see fuse.h): the agent's enabled mounts,
 * their buckets' credentials opened with the master key, each bucket tried
 * with a real request, written as <image>.mounts (JSON, 0600). */
#include "runner/fuse.h"
#include "buckets/buckets.h"
#include "core/log.h"
#include "core/util.h"
#include "crypto/crypto.h"
#include "db/record.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char SQL_MOUNTS[] =
	"SELECT m.id, m.mount_path, m.source_prefix, m.read_only, m.cache_enabled,"
	" m.cache_ttl_seconds, b.slug, b.provider, b.bucket_name, b.region, b.endpoint_url,"
	" b.cred_nonce, b.cred_sealed FROM mounts m JOIN buckets b ON b.id = m.bucket_id"
	" WHERE m.agent_id = ? AND m.enabled = 1 ORDER BY m.mount_path";
enum { C_ID, C_PATH, C_PREFIX, C_RO, C_CACHE, C_TTL, C_SLUG, C_PROVIDER, C_BUCKET, C_REGION,
       C_ENDPOINT, C_NONCE, C_SEALED };

static int mount_error(ah_err *err, const char *path, const char *slug, const char *why)
{
	return ah_err_set(err, AH_EINVALID, "Bucket mount at %s (bucket '%s'): %s", path, slug, why);
}

/* Row i's credentials, opened and decoded. */
static int open_creds(ah_arena *a, const ah_rows *rows, size_t i, ah_provider p,
                      ah_bucket_creds *c, ah_err *err)
{
	char **v = rows->v[i], *doc;
	size_t len;
	if (!v[C_NONCE] || !v[C_SEALED] || rows->len[i][C_NONCE] != AH_NONCE_BYTES)
		return mount_error(err, v[C_PATH], v[C_SLUG], ah_sprintf(a, "the bucket has no "
		                   "credentials; set them with POST /api/v1/buckets/%s/credentials",
		                   v[C_SLUG]));
	if (ah_crypto_open(a, &doc, &len, (unsigned char *)v[C_NONCE], (unsigned char *)v[C_SEALED],
	                   rows->len[i][C_SEALED]) != 0 ||
	    ah_bucket_creds_decode(a, c, p, doc, err) != 0)
		return mount_error(err, v[C_PATH], v[C_SLUG], "its stored credentials cannot be read "
		                   "(set them again)");
	return 0;
}

static void put_str(json_object *o, const char *k, const char *v)
{
	if (v)
		json_object_object_add(o, k, json_object_new_string(v));
}

/* One mount: tried with a real request, then as a plan entry. */
static int plan_entry(ah_arena *a, const ah_config *cfg, const ah_rows *rows, size_t i,
                      json_object *arr, ah_err *err)
{
	char **v = rows->v[i];
	int p = ah_enum_find(ah_provider_names, v[C_PROVIDER]);
	ah_bucket_creds c;
	if (p < 0)
		return mount_error(err, v[C_PATH], v[C_SLUG], "unknown provider");
	int rc = open_creds(a, rows, i, (ah_provider)p, &c, err);
	if (rc != 0)
		return rc;
	ah_bucket_target t = {
		.provider = (ah_provider)p, .bucket_name = v[C_BUCKET], .region = v[C_REGION],
		.endpoint_url = v[C_ENDPOINT], .prefix = v[C_PREFIX], .creds = &c,
		.policy = ah_bucket_policy(cfg),
	};
	bool ok = false;
	const char *message = "";
	if (ah_bucket_probe(a, &t, &ok, &message) != 0 || !ok)
		return mount_error(err, v[C_PATH], v[C_SLUG], message);
	json_object *o = json_object_new_object();
	const char *keys[] = {"id", "path", "prefix", "slug", "provider", "bucket", "region",
	                      "endpoint"};
	const int cols[] = {C_ID, C_PATH, C_PREFIX, C_SLUG, C_PROVIDER, C_BUCKET, C_REGION, C_ENDPOINT};
	for (size_t k = 0; k < sizeof(cols) / sizeof(cols[0]); k++)
		put_str(o, keys[k], v[cols[k]]);
	json_object_object_add(o, "read_only", json_object_new_boolean(ah_cell_ll(v[C_RO]) != 0));
	json_object_object_add(o, "cache", json_object_new_boolean(ah_cell_ll(v[C_CACHE]) != 0));
	json_object_object_add(o, "ttl", json_object_new_int64(ah_cell_ll(v[C_TTL])));
	put_str(o, "access_key_id", c.access_key_id);
	put_str(o, "secret_access_key", c.secret_access_key);
	put_str(o, "service_account_json", c.sa_json);
	json_object_array_add(arr, o);
	return 0;
}

/* Written beside path and renamed into place: a run that reads the plan while
 * another runner thread writes it (two first calls adopting the image at
 * once, images.c) sees a whole plan, never a half or none. */
static int write_private(const char *path, const char *text, ah_err *err)
{
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof tmp, "%s.tmp-%ld-%lu", path, (long)getpid(), (unsigned long)pthread_self());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return ah_err_set(err, AH_EFAIL, "%s: %s", tmp, strerror(errno));
	size_t len = strlen(text);
	bool ok = write(fd, text, len) == (ssize_t)len && fchmod(fd, 0600) == 0;
	if (close(fd) != 0)
		ok = false;
	if (ok && rename(tmp, path) == 0)
		return 0;
	unlink(tmp);
	return ah_err_set(err, AH_EFAIL, "%s: write failed", path);
}

/* The master key file is the API's (it may be made after the runner starts):
 * read when the first mount needs it, and again later if it was missing.
 * Deploys (the job thread) and takeovers (run threads) both get here. */
static int load_key(const ah_config *cfg, ah_err *err)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static bool loaded;
	ah_err why = {0};
	pthread_mutex_lock(&lock);
	if (!loaded && ah_crypto_init(cfg, 0, &why) == 0)
		loaded = true;
	bool ok = loaded;
	pthread_mutex_unlock(&lock);
	return ok ? 0 : ah_err_set(err, AH_EFAIL, "bucket credentials cannot be opened: %s", why.msg);
}

int ah_fuse_plan_write(ah_db *db, ah_arena *a, const ah_config *cfg, const char *agent_id,
                       const char *image_dir, ah_err *err)
{
	ah_rows rows;
	const char *path = ah_sprintf(a, "%s.mounts", image_dir);
	if (ah_db_query(db, a, &rows, SQL_MOUNTS, "s", agent_id) != 0)
		return ah_err_set(err, AH_EFAIL, "database error while reading the agent's mounts");
	if (rows.n == 0) {
		unlink(path); /* a stale plan, if any; a new one replaces it by rename */
		return 0;
	}
	if (load_key(cfg, err) != 0)
		return AH_EFAIL;
	json_object *arr = json_object_new_array();
	int rc = 0;
	for (size_t i = 0; i < rows.n && rc == 0; i++)
		rc = plan_entry(a, cfg, &rows, i, arr, err);
	if (rc == 0)
		rc = write_private(path, json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PLAIN), err);
	json_object_put(arr);
	return rc;
}
