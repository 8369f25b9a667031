/* One attempt of a deploy job: read the agent, run the deploy pipeline
 * (lib/deploy) into <data_dir>/images/<agent>/<job>, then switch the agent to
 * the new image in one transaction. Only after the switch are the agent's old
 * sandboxes destroyed and its old image retired, so a redeploy of an active
 * agent keeps serving from the old image until the new one is ready. */
#include "runner/runner.h"
#include "runner/warm.h"
#include "runner/sandboxes.h"
#include "runner/fuse.h"
#include "runner/run_files.h"
#include "core/arena.h"
#include "core/log.h"
#include "core/util.h"
#include "deploy/deploy.h"
#include "db/enums.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct agent_row {
	char slug[64];
	bool from_git;
	const char *git_url, *git_branch, *old_image, *code_sha;
};

static int load_agent(ah_db *db, ah_arena *a, const char *agent_id, struct agent_row *out,
                      ah_err *err)
{
	ah_rows rows;
	if (ah_db_query(db, a, &rows, "SELECT slug, source_type, git_repo_url, git_branch, image_path, "
	                "code_sha256 FROM agents WHERE id = ?", "s", agent_id) != 0)
		return ah_err_set(err, AH_EFAIL, "database error while reading the agent");
	if (rows.n == 0)
		return ah_err_set(err, AH_ECONFLICT, "agent deleted");
	snprintf(out->slug, sizeof(out->slug), "%s", ah_cell(&rows, 0, 0));
	out->from_git = strcmp(ah_cell(&rows, 0, 1), "git") == 0;
	out->git_url = ah_cell(&rows, 0, 2);
	out->git_branch = ah_cell(&rows, 0, 3);
	out->old_image = ah_cell(&rows, 0, 4);
	out->code_sha = ah_cell(&rows, 0, 5);
	return 0;
}

/* <data_dir>/images/<agent_id>/<job>: only ever an image in our own images
 * directory, of the agent the row is, whatever the row's path says. */
static bool image_of(ah_arena *a, const struct ah_runner *r, const char *agent_id,
                     const char *image)
{
	const char *dir = ah_sprintf(a, "%s/images/%s/", r->data_dir, agent_id);
	return image && strncmp(image, dir, strlen(dir)) == 0 && !strstr(image, "/../");
}

#define REUSE_OTHERS 8 /* the owner's most recently deployed agents tried (the LIMIT) */

/* The images whose node_modules this build may take (deploy/reuse.c): the
 * agent's previous one, then the same user's other agents' (a tenant trusts
 * its own install output; never another user's). */
static const char *const *reuse_candidates(ah_db *db, ah_arena *a, const struct ah_runner *r,
                                           const char *agent_id, const char *old_image)
{
	const char **list = ah_alloc(a, sizeof(*list) * (REUSE_OTHERS + 2));
	size_t n = 0;
	if (image_of(a, r, agent_id, old_image))
		list[n++] = old_image;
	ah_rows rows;
	if (ah_db_query(db, a, &rows, "SELECT o.id, o.image_path FROM agents o JOIN agents me "
	                "ON me.user_id = o.user_id WHERE me.id = ? AND o.id <> me.id AND "
	                "o.image_path IS NOT NULL ORDER BY o.deployed_at DESC LIMIT 8", "s", agent_id) == 0)
		for (size_t i = 0; i < rows.n && i < REUSE_OTHERS; i++)
			if (image_of(a, r, ah_cell(&rows, i, 0), ah_cell(&rows, i, 1)))
				list[n++] = ah_cell(&rows, i, 1);
	list[n] = NULL;
	return list;
}

static void fill_request(struct ah_deploy_req *q, ah_db *db, ah_arena *a, struct ah_runner *r,
                         struct ah_job *j, const struct agent_row *ag)
{
	const ah_deploy_settings *d = &ah_settings_of(r->cfg)->deploy;
	q->log_tag = j->tag;
	q->from_git = ag->from_git;
	q->git_url = ag->git_url;
	q->git_branch = ag->git_branch;
	q->tarball = ah_sprintf(a, "%s/code/%s.tar.gz", r->data_dir, j->agent_id);
	q->work_dir = ah_sprintf(a, "%s/build/%lld", r->data_dir, j->id);
	q->image_dir = ah_sprintf(a, "%s/images/%s/%lld", r->data_dir, j->agent_id, j->id);
	q->store_dir = ah_sprintf(a, "%s/store", r->data_dir);
	q->build.npm_cache = ah_sprintf(a, "%s/npm-cache", r->data_dir);
	q->git.max_bytes = d->git_max_bytes;
	q->git.timeout_seconds = (int)d->git_timeout_seconds;
	q->git.allow_hosts = d->git_allow_hosts;
	q->git.allow_private = d->git_allow_private; /* development only */
	q->git.ssh_key = *d->git_ssh_key ? d->git_ssh_key : NULL;
	q->git.cancel = &r->stopping;
	q->git.log_tag = j->tag;
	q->tar = (struct ah_tar_limits)AH_TAR_LIMITS_DEFAULT;
	q->tar.max_compressed = d->code_max_bytes;
	q->tar.max_extracted = d->code_max_extracted_bytes;
	q->build.timeout_seconds = (int)d->timeout_seconds;
	q->build.disk_bytes = d->build_disk_mb << 20;
	q->build.image_max_bytes = d->image_max_mb << 20;
	q->build.log_tag = j->tag;
	q->build.cancel = &r->stopping;
	q->build.reuse_from = reuse_candidates(db, a, r, j->agent_id, ag->old_image);
	q->git.commit_out = j->commit;
}

/* Inside the switch transaction: the job must still be ours and the newest. */
static int still_ours(ah_db *db, ah_arena *a, struct ah_runner *r, const struct ah_job *j)
{
	ah_rows rows;
	if (ah_db_query(db, a, &rows, "SELECT id FROM agents WHERE id = ? FOR UPDATE", "s",
	                j->agent_id) != 0 || rows.n == 0)
		return AH_ECONFLICT;
	if (ah_db_query(db, a, &rows, "SELECT state, runner_id FROM deploy_jobs WHERE id = ? "
	                "FOR UPDATE", "i", j->id) != 0 || rows.n == 0)
		return AH_EFAIL;
	const char *owner = ah_cell(&rows, 0, 1);
	if (strcmp(ah_cell(&rows, 0, 0), "running") != 0 || !owner || strcmp(owner, r->id) != 0)
		return AH_ECONFLICT; /* lease lost: another runner is redoing it */
	if (ah_db_query(db, a, &rows, "SELECT id FROM deploy_jobs WHERE agent_id = ? AND id > ? "
	                "LIMIT 1", "si", j->agent_id, j->id) != 0)
		return AH_EFAIL;
	if (rows.n > 0) {
		ah_db_exec(db, NULL, "UPDATE deploy_jobs SET state = " AH_SQ(AH_JOB_S_FAILED) ", lease_until = NULL, "
		           "error = 'Superseded by a newer deploy', updated_at = NOW(3) WHERE id = ?",
		           "i", j->id);
		return AH_EDONE; /* commit that, switch nothing */
	}
	return 0;
}

static int switch_once(ah_db *db, ah_arena *a, struct ah_runner *r, struct ah_job *j,
                       const struct ah_deploy_req *q, const struct ah_manifest *m)
{
	const char *sandbox_id = ah_id_new(a, "sbx");
	if (ah_db_begin(db) != 0)
		return AH_EFAIL;
	int rc = still_ours(db, a, r, j);
	ah_rows old;
	if (rc == 0 && ah_db_query(db, a, &old, "SELECT image_sha256 FROM agents WHERE id = ? FOR UPDATE",
	                           "s", j->agent_id) != 0)
		rc = AH_EFAIL;
	if (rc == 0)
		snprintf(j->old_image_sha, sizeof j->old_image_sha, "%s",
		         old.n == 1 && ah_cell(&old, 0, 0) ? ah_cell(&old, 0, 0) : "");
	if (rc == 0)
		rc = ah_db_exec(db, NULL, "UPDATE agents SET status = " AH_SQ(AH_AGENT_S_ACTIVE) ", status_message = NULL, "
		                "image_path = ?, image_sha256 = NULLIF(?, ''), entrypoint = ?, runner_id = ?, "
		                "sandbox_id = ?, needs_redeploy = 0, deployed_at = NOW(3), updated_at = NOW(3) "
		                "WHERE id = ?", "ssssss", q->image_dir, j->image_sha, m->entrypoint, r->id,
		                sandbox_id, j->agent_id);
	if (rc == 0)
		rc = ah_db_exec(db, NULL, "UPDATE sessions SET state = " AH_SQ(AH_SESSION_S_ENDED) ", sandbox_id = NULL "
		                "WHERE agent_id = ? AND state = " AH_SQ(AH_SESSION_S_ACTIVE), "s", j->agent_id);
	if (rc == 0)
		rc = ah_deploy_record_active(db, j, q->image_dir, m->entrypoint, j->commit);
	if (rc == 0)
		rc = ah_db_exec(db, NULL, "UPDATE deploy_jobs SET state = " AH_SQ(AH_JOB_S_DONE) ", lease_until = NULL, "
		                "error = NULL, updated_at = NOW(3) WHERE id = ?", "i", j->id);
	if ((rc == 0 || rc == AH_EDONE) && ah_db_commit(db) != 0)
		rc = AH_EFAIL;
	if (rc != 0 && rc != AH_EDONE)
		ah_db_rollback(db);
	if (rc == 0)
		ah_log_info("%s: agent %s active with image %s (%s)", j->tag, j->agent_id, q->image_dir,
		            sandbox_id);
	return rc;
}

/* A deadlock, or on a cluster a certification conflict with another node's
 * write to the agent's rows, rolled the switch back: it is run again (the
 * build is not). */
static int switch_agent(ah_db *db, ah_arena *a, struct ah_runner *r, struct ah_job *j,
                        const struct ah_deploy_req *q, const struct ah_manifest *m)
{
	int rc = AH_EFAIL;
	for (int tries = 0; tries < 4; tries++) {
		rc = switch_once(db, a, r, j, q, m);
		if (rc != AH_EFAIL || !ah_db_deadlocked(db))
			break;
		ah_log_warn("%s: switch rolled back (%s); again", j->tag, ah_db_error(db));
		usleep(20000u << tries);
	}
	return rc;
}

/* Old sandboxes hold the old image and old state: both go after the switch. */
static void retire_old(const struct ah_runner *r, const struct ah_job *j, const char *old_image,
                       const char *new_image)
{
	int n = ah_warm_destroy_agent(j->agent_id); /* its recipe names the old image */
	ah_fuse_retain(j->agent_id, new_image); /* mounts the new deploy dropped or changed */
	if (n > 0)
		ah_log_info("%s: destroyed %d sandbox(es) of the previous deploy", j->tag, n);
	size_t dl = strlen(r->data_dir);
	/* Only ever delete inside our own images directory, whatever the row says. */
	if (old_image && strcmp(old_image, new_image) != 0 && strncmp(old_image, r->data_dir, dl) == 0
	    && strncmp(old_image + dl, "/images/", 8) == 0 && !strstr(old_image, "/../"))
		ah_sandboxes_retire_image(old_image);
}

/* The agent's enabled bucket mounts (fuse.h): planned next to the image and
 * started, so that a mount that cannot work fails the deploy, with the old
 * image still serving, rather than the agent's reads. */
static int apply_mounts(ah_db *db, ah_arena *a, struct ah_runner *r, const struct ah_job *j,
                        const char *image, ah_err *err)
{
	ah_sandbox_bind *binds = NULL;
	size_t n = 0;
	int rc = ah_fuse_plan_write(db, a, r->cfg, j->agent_id, image, err);
	if (rc == 0)
		rc = ah_fuse_binds(j->agent_id, image, AH_FUSE_FOR_DEPLOY, &binds, &n, err);
	ah_fuse_binds_free(binds, n);
	if (rc != 0) {
		unlink(ah_sprintf(a, "%s.mounts", image));
		/* Not worth retrying: the user must change something. */
		rc = AH_EINVALID;
	} else if (n > 0) {
		ah_log_info("%s: %zu bucket mount(s) ready", j->tag, n);
	}
	return rc;
}

/* The image into the file store, so that another runner can take the agent
 * over if this one is gone (images.c). Without it the agent still works here:
 * a warning, not a failed deploy. */
static void publish(ah_db *db, struct ah_runner *r, struct ah_job *j, const char *image_dir)
{
	ah_err err = {0};
	j->image_sha[0] = '\0';
	if (ah_image_publish(r, db, image_dir, j->image_sha, &err) != 0) {
		j->image_sha[0] = '\0';
		ah_log_warn("%s: image not kept in the file store (%s); no other runner can take "
		            "the agent over", j->tag, err.msg);
	}
}

/* Lets go of an image never switched to (its bytes go with the last
 * reference); a failure leaves a blob behind, logged. */
static void drop_image(ah_db *db, const struct ah_runner *r, const struct ah_job *j, const char *sha)
{
	ah_err err = {0};
	const ah_store *s = ah_run_files_store(r->cfg);
	if (sha[0] && s && ah_blob_drop(db, s, sha, &err) != 0)
		ah_log_warn("%s: image %.12s left in the file store: %s", j->tag, sha, err.msg);
}

/* After the pipeline built the image: the switch, with a few tries while the
 * database is away. */
static int finish(ah_db *db, ah_arena *a, struct ah_runner *r, struct ah_job *j,
                  const struct ah_deploy_req *q, const struct ah_manifest *m,
                  const char *old_image, ah_err *err)
{
	int rc = AH_EFAIL;
	for (int tries = 0; tries < 10 && rc == AH_EFAIL && !r->job_lost; tries++) {
		if (tries > 0)
			sleep(2);
		rc = switch_agent(db, a, r, j, q, m);
	}
	if (rc == 0) {
		retire_old(r, j, old_image, q->image_dir);
		/* The deploy's record holds the reference publish took; the agent's
		 * older records beyond deploy_images_kept let theirs go (a rollback
		 * fetches a kept image from the store: images.c). */
		ah_deploy_images_prune(db, r, j);
		return 0;
	}
	drop_image(db, r, j, j->image_sha); /* never switched to */
	ah_deploy_rmtree(q->image_dir);
	if (rc == AH_EDONE || rc == AH_ECONFLICT) {
		ah_log_warn("%s: %s; image discarded", j->tag,
		            rc == AH_EDONE ? "superseded by a newer deploy" : "lease lost");
		return AH_ECONFLICT;
	}
	return ah_err_set(err, AH_EFAIL, "database unavailable while activating the agent");
}

int ah_deploy_job_run(ah_db *db, struct ah_runner *r, struct ah_job *j, ah_err *err)
{
	ah_arena *a = ah_arena_new();
	struct agent_row ag = {0};
	struct ah_deploy_req q = {0};
	struct ah_manifest m;
	struct ah_deploy_log *log = ah_alloc(a, sizeof(*log));
	ah_deploy_log_open(log, db, j->id, j->attempts);
	int rc = load_agent(db, a, j->agent_id, &ag, err);
	if (rc == 0) {
		snprintf(j->tag, sizeof(j->tag), "agent=%s (%s) job=%lld", ag.slug, j->agent_id, j->id);
		ah_log_info("%s: deploy attempt %d (%s)", j->tag, j->attempts,
		            ag.from_git ? "git" : "uploaded code");
		fill_request(&q, db, a, r, j, &ag);
		q.build.output = ah_deploy_log_write;
		q.build.output_ctx = log;
		ah_deploy_rmtree(q.image_dir); /* left by an attempt that died after building */
		if (!ag.from_git)
			rc = ah_code_fetch(r, ag.code_sha, q.tarball, err);
		if (rc == 0)
			rc = ah_deploy_build_image(&m, &q, err);
		ah_deploy_record_commit(db, j);
		ah_deploy_rmtree(q.work_dir);
	}
	if (rc == 0 && (rc = apply_mounts(db, a, r, j, q.image_dir, err)) != 0) {
		ah_deploy_say(ah_deploy_log_write, log, "==> failed: %s", err->msg);
		ah_deploy_rmtree(q.image_dir);
		ah_deps_forget(q.image_dir);
	}
	bool built = rc == 0;
	if (built) {
		publish(db, r, j, q.image_dir);
		/* Written before the switch: the switch marks the job done, and a
		 * client that sees that must find the whole log. */
		ah_deploy_say(ah_deploy_log_write, log, "==> image %.12s built; making it the agent's",
		              j->image_sha[0] ? j->image_sha : "(not in the file store)");
		ah_deploy_log_flush(log);
	}
	if (rc == 0 && (rc = finish(db, a, r, j, &q, &m, ag.old_image, err)) != 0) {
		/* Not switched (superseded, lease lost, deleted): its mount plan and
		 * the processes only it named go with its image. */
		unlink(ah_sprintf(a, "%s.mounts", q.image_dir));
		ah_deps_forget(q.image_dir);
		ah_fuse_retain(j->agent_id, ag.old_image);
	}
	if (rc == AH_ECONFLICT && !q.image_dir)
		ah_log_info("%s: agent deleted; job dropped", j->tag);
	if (built && rc != 0)
		ah_deploy_say(ah_deploy_log_write, log, "==> not activated: %s", rc == AH_ECONFLICT ?
		              "superseded by a newer deploy, or the job was taken over" : err->msg);
	ah_deploy_log_flush(log); /* before jobs.c records a failure: a client that sees it reads all */
	ah_arena_destroy(a);
	return rc;
}
