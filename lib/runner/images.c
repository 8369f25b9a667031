/* Images that outlive their runner (docs/cluster.md), and uploaded code that
 * reaches a runner on another machine than the API host it was uploaded to. A deploy packs the image
 * it built into the file store (content-addressed: local directory on one
 * host, S3 for several) and records its SHA-256 on the agent; a runner asked
 * to run an image that is not in its own data directory (the agent was taken
 * over from a runner that is gone) fetches that archive on first use, checks
 * its hash, and extracts it with the upload's checks into
 * <data_dir>/images/<agent>/<job>, the same name the deploying runner used. */
#include "runner/runner.h"
#include "runner/fuse.h"
#include "runner/run_files.h"
#include "runner/run_req.h"
#include "core/arena.h"
#include "core/json.h"
#include "core/log.h"
#include "deploy/deploy.h"
#include "files/files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Kept with a reference of its own in file_blobs (ah_blob_keep): the agent
 * holds it until a redeploy replaces it or the agent goes (ah_blob_drop). */
int ah_image_publish(const struct ah_runner *r, ah_db *db, const char *image_dir, char sha[65],
                     ah_err *err)
{
	const ah_store *s = ah_run_files_store(r->cfg);
	if (!s)
		return ah_err_set(err, AH_EFAIL, "the file store is unavailable");
	ah_arena *a = ah_arena_new();
	char *tmp = NULL;
	int fd = -1;
	long long size = 0;
	int rc = ah_store_tmp(s, a, &fd, &tmp, err);
	if (fd >= 0)
		close(fd);
	/* node_modules packed once per tree: a redeploy that reused it reuses
	 * its packed form too (ah_image_pack) */
	char part[PATH_MAX];
	ah_deps_part_path(part, sizeof part, image_dir);
	if (rc == 0)
		rc = ah_image_pack(image_dir, tmp, part, err);
	if (rc == 0)
		rc = ah_image_pack_sha256(tmp, part, sha, &size, err);
	if (rc == 0)
		rc = ah_blob_keep(db, s, sha, size, tmp, "application/zstd", err); /* consumes tmp */
	if (tmp)
		unlink(tmp); /* when it failed before placing it */
	ah_arena_destroy(a);
	return rc;
}

/* <agent>/<job> of an image path .../images/<agent>/<job>, checked as tokens. */
static int image_name(const char *image, char *agent, char *job, size_t n)
{
	const char *p = image ? strstr(image, "/images/") : NULL;
	const char *last = NULL;
	while (p) { /* the last "/images/" */
		last = p;
		p = strstr(p + 1, "/images/");
	}
	if (!last)
		return AH_EINVALID;
	const char *ag = last + 8, *slash = strchr(ag, '/');
	if (!slash || (size_t)(slash - ag) >= n || strlen(slash + 1) >= n)
		return AH_EINVALID;
	snprintf(agent, n, "%.*s", (int)(slash - ag), ag);
	snprintf(job, n, "%s", slash + 1);
	return ah_run_token_ok(agent, 32, "_") && ah_run_token_ok(job, 20, "") ? 0 : AH_EINVALID;
}

/* The blob sha fetched from the store into a new file and checked against
 * its name; *tmp (from a) is removed on failure. The file is in the store's
 * tmp/, or beside `beside` when the caller renames it there (files_dir may
 * be another filesystem than data_dir). noun names it in the error. */
static int fetch_checked(const ah_store *s, ah_arena *a, const char *sha, const char *noun,
                         const char *beside, char **tmp, ah_err *err)
{
	char got[65] = "";
	long long size = 0;
	int fd = -1, rc = 0;
	*tmp = NULL;
	if (beside) {
		*tmp = ah_sprintf(a, "%s.fetch-XXXXXX", beside);
		if ((fd = mkostemp(*tmp, O_CLOEXEC)) < 0) {
			rc = ah_err_set(err, AH_EFAIL, "cannot create %s: %s", *tmp, strerror(errno));
			*tmp = NULL;
		}
	} else {
		rc = ah_store_tmp(s, a, &fd, tmp, err);
	}
	if (fd >= 0)
		close(fd);
	if (rc == 0)
		rc = ah_store_fetch(s, sha, *tmp, err);
	if (rc == 0 && (rc = ah_file_sha256(*tmp, got, &size, err)) == 0 && strcmp(got, sha) != 0)
		rc = ah_err_set(err, AH_EFAIL, "stored %s %.12s… has the wrong hash", noun, sha);
	if (rc != 0 && *tmp) {
		unlink(*tmp);
		*tmp = NULL;
	}
	return rc;
}

/* The mount plan a deploy writes (fuse.h), for the agent's enabled mounts
 * now: without it the agent's calls here would run without its buckets. A
 * connection of its own: run threads have none, and a takeover is rare. */
static int plan_mounts(const struct ah_runner *r, ah_arena *a, const char *agent,
                       const char *dest, ah_err *err)
{
	ah_db *db = NULL;
	ah_err why = {0};
	int rc = ah_db_open(&db, r->cfg, &why);
	if (rc == 0)
		rc = ah_fuse_plan_write(db, a, r->cfg, agent, dest, &why);
	ah_db_close(db);
	if (rc != 0)
		ah_err_set(err, rc, "the agent was taken over from a runner that is gone and its "
		           "bucket mounts cannot be set up here: %s", why.msg);
	return rc;
}

/* Fetched, checked and extracted beside dest, its mount plan written, then
 * renamed into place: two first calls at once both fetch and plan, one rename
 * wins, the other's copy goes. The plan comes first so that an image in place
 * always has its plan: one that cannot be made (a bucket unreachable) fails
 * this call and leaves the next to try again. */
static int fetch_image(const struct ah_runner *r, const char *agent, const char *sha,
                       const char *dest, ah_err *err)
{
	const ah_store *s = ah_run_files_store(r->cfg);
	if (!s)
		return ah_err_set(err, AH_EFAIL, "the file store is unavailable");
	ah_arena *a = ah_arena_new();
	char *tmp = NULL, stage[PATH_MAX];
	struct ah_tar_limits lim = AH_TAR_LIMITS_DEFAULT;
	lim.max_extracted = ah_settings_of(r->cfg)->deploy.image_max_mb << 20;
	lim.max_compressed = lim.max_extracted + (lim.max_extracted >> 2) + (1 << 20);
	lim.noun = "The stored image";
	lim.zstd_too = true; /* packed since 2026-11-28; gzip before */
	snprintf(stage, sizeof stage, "%s.adopt-%ld-%lu", dest, (long)getpid(),
	         (unsigned long)pthread_self());
	int rc = fetch_checked(s, a, sha, "image", NULL, &tmp, err);
	if (rc == 0 && mkdir(stage, 0700) != 0)
		rc = ah_err_set(err, AH_EFAIL, "cannot create %s: %s", stage, strerror(errno));
	if (rc == 0 && (rc = ah_tarball_extract(tmp, stage, &lim, err)) == 0)
		rc = ah_deploy_make_readonly(stage, err);
	if (rc == 0)
		rc = plan_mounts(r, a, agent, dest, err);
	if (rc == 0 && rename(stage, dest) != 0 && errno != EEXIST && errno != ENOTEMPTY)
		rc = ah_err_set(err, AH_EFAIL, "cannot move the image into place: %s", strerror(errno));
	ah_deploy_rmtree(stage); /* nothing left after a rename that worked */
	if (tmp)
		unlink(tmp);
	ah_arena_destroy(a);
	return rc;
}

int ah_image_adopt(const struct ah_runner *r, const char *image, const char *sha, char *out,
                   size_t n, ah_err *err)
{
	char agent[64], job[64];
	struct stat st;
	if (image_name(image, agent, job, sizeof agent) != 0 || !sha || strlen(sha) != 64 ||
	    !ah_run_token_ok(sha, 64, ""))
		return ah_err_set(err, AH_EINVALID, "image is not an image directory of this runner");
	ah_arena *a = ah_arena_new();
	const char *dir = ah_sprintf(a, "%s/images/%s", r->data_dir, agent);
	const char *path = ah_sprintf(a, "%s/%s", dir, job);
	int rc = strlen(path) < n ? 0 : ah_err_set(err, AH_EINVALID, "image path too long");
	if (rc == 0)
		memcpy(out, path, strlen(path) + 1);
	if (rc == 0 && !(stat(out, &st) == 0 && S_ISDIR(st.st_mode))) {
		rc = ah_deploy_mkdirs(dir, err);
		if (rc == 0)
			rc = fetch_image(r, agent, sha, out, err);
		if (rc == 0)
			ah_log_info("agent=%s: fetched its image %s from the file store (taken over, or rolled back to)", agent, job);
	}
	ah_arena_destroy(a);
	return rc;
}

int ah_image_adopt_req(const struct ah_runner *r, json_object *req, ah_err *err)
{
	const char *image = ah_json_get_str(req, "image"), *sha = ah_json_get_str(req, "image_sha256");
	char local[PATH_MAX];
	struct stat st;
	size_t dl = strlen(r->data_dir);
	/* Ours and here (ah_run_req_parse checks it), or nothing to take over. An
	 * image of ours that is gone is a kept one a rollback switched back to
	 * (a redeploy retired its directory): fetched again like a takeover. */
	if (!image || !sha || (strncmp(image, r->data_dir, dl) == 0 && strncmp(image + dl, "/images/", 8) == 0
	                       && stat(image, &st) == 0 && S_ISDIR(st.st_mode)))
		return 0;
	int rc = ah_image_adopt(r, image, sha, local, sizeof local, err);
	if (rc == 0)
		json_object_object_add(req, "image", json_object_new_string(local));
	return rc;
}

/* An uploaded tarball that is not here, or not the one the agent names now
 * (uploaded again through another host): from the file store, checked. */
int ah_code_fetch(const struct ah_runner *r, const char *sha, const char *path, ah_err *err)
{
	char got[65] = "";
	long long size = 0;
	if (!sha || (ah_file_sha256(path, got, &size, err) == 0 && strcmp(got, sha) == 0))
		return 0; /* here (or nothing to check against: the pipeline says what is wrong) */
	const ah_store *s = ah_run_files_store(r->cfg);
	if (!s)
		return ah_err_set(err, AH_EFAIL, "the uploaded code is not on this runner and the file "
		                  "store is unavailable");
	ah_arena *a = ah_arena_new();
	char *tmp = NULL;
	const char *slash = strrchr(path, '/');
	int rc = slash ? ah_deploy_mkdirs(ah_sprintf(a, "%.*s", (int)(slash - path), path), err) : 0;
	if (rc == 0)
		rc = fetch_checked(s, a, sha, "code", path, &tmp, err);
	if (rc == 0 && rename(tmp, path) != 0)
		rc = ah_err_set(err, AH_EFAIL, "cannot move the code into place: %s", strerror(errno));
	if (rc != 0 && tmp)
		unlink(tmp);
	ah_arena_destroy(a);
	return rc;
}

void ah_image_purge_agent(const struct ah_runner *r, const char *agent_id)
{
	char p[PATH_MAX + 64];
	snprintf(p, sizeof p, "%s/images/%s", r->data_dir, agent_id);
	ah_deploy_rmtree(p);
	snprintf(p, sizeof p, "%s/store", r->data_dir);
	ah_image_store_sweep(p); /* the files only its images linked (deploy/dedupe.c) */
	snprintf(p, sizeof p, "%s/code/%s.tar.gz", r->data_dir, agent_id);
	unlink(p); /* fetched from the store (ah_code_fetch): the API host's own goes with its row */
}
