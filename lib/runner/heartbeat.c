/* Keeping the runner visible and its work its own: the runners row's heartbeat,
 * the lease of the job in progress, and the reclaim of idle session sandboxes
 * (whose sessions rows become `expired`). One thread with its own connection.
 * The row's address is where the API sends an agent's calls (runner_client.c):
 * the unix socket path, or host:port when the runner takes TCP (tcp.c). */
#include "runner/blob_cache.h"
#include "runner/runner.h"
#include "runner/sandboxes.h"
#include "runner/fuse.h"
#include "runner/warm.h"
#include "core/log.h"
#include "core/util.h"
#include "db/history.h"
#include "files/files.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/arena.h"
#include "db/enums.h"

int ah_heartbeat_register(ah_db *db, const struct ah_runner *r, ah_err *err)
{
	if (ah_db_exec(db, NULL, "INSERT INTO runners (id, address, capacity, started_at, heartbeat_at) "
	               "VALUES (?, ?, ?, NOW(3), NOW(3)) ON DUPLICATE KEY UPDATE address = VALUES(address), "
	               "capacity = VALUES(capacity), started_at = NOW(3), heartbeat_at = NOW(3)", "ssi",
	               r->id, r->address, (long long)r->capacity) != 0)
		return ah_err_set(err, AH_EFAIL, "cannot register in runners: %s", ah_db_error(db));
	return 0;
}

static void beat(ah_db *db, const struct ah_runner *r)
{
	unsigned long long n = 0;
	ah_err err = {0};
	if (ah_db_exec(db, &n, "UPDATE runners SET heartbeat_at = NOW(3) WHERE id = ?", "s", r->id) != 0) {
		ah_metrics_beat(false);
		return;
	}
	ah_metrics_beat(true);
	ah_metrics_read_queue(db);
	/* Someone removed the row (an operator cleaning up): put it back. */
	if (n == 0 && ah_heartbeat_register(db, r, &err) != 0)
		ah_log_warn("heartbeat: %s", err.msg);
}

/* The renewal matched nothing: the job is no longer ours and running. Lost
 * when another runner holds it now (it claimed the job after our lease ran
 * out) or the row is gone; not when our own job thread has just finished it
 * (done, failed) or put it back for a retry (queued, no runner) and not yet
 * let go of it (ah_jobs_thread's set_current comes a moment after). A failed
 * look says nothing: the next renewal decides. */
static bool lease_lost(ah_db *db, const struct ah_runner *r, long long job)
{
	ah_arena *a = ah_arena_new();
	ah_rows rows;
	bool lost = false;
	if (ah_db_query(db, a, &rows, "SELECT runner_id FROM deploy_jobs WHERE id = ?", "i", job) == 0) {
		const char *holder = rows.n ? ah_cell(&rows, 0, 0) : NULL;
		lost = rows.n == 0 || (holder && strcmp(holder, r->id) != 0);
	}
	ah_arena_destroy(a);
	return lost;
}

static void renew_lease(ah_db *db, struct ah_runner *r)
{
	pthread_mutex_lock(&r->job_mu);
	long long job = r->current_job;
	pthread_mutex_unlock(&r->job_mu);
	if (!job)
		return;
	unsigned long long n = 0;
	if (ah_db_exec(db, &n, "UPDATE deploy_jobs SET lease_until = NOW(3) + INTERVAL ? SECOND, "
	               "updated_at = NOW(3) WHERE id = ? AND runner_id = ? AND state = " AH_SQ(AH_JOB_S_RUNNING),
	               "iis", (long long)r->lease_seconds, job, r->id) != 0)
		return; /* database away: the lease may run out, and then the job is redone */
	if (n == 0 && lease_lost(db, r, job)) {
		pthread_mutex_lock(&r->job_mu);
		if (r->current_job == job) {
			r->job_lost = 1;
			ah_log_warn("job=%lld: lease lost to another runner", job);
		}
		pthread_mutex_unlock(&r->job_mu);
	}
}

/* The safety net under "no agent stays deploying forever": an agent marked
 * deploying without a live job (a job row lost to an operator or a crash
 * between the API's two writes) is put in error after a while. */
static void sweep_lost_deploys(ah_db *db)
{
	unsigned long long n = 0;
	ah_db_exec(db, &n, "UPDATE agents a SET status = " AH_SQ(AH_AGENT_S_ERROR) ", status_message = "
	           "'Deploy lost: no deploy job is queued for this agent; deploy again', "
	           "updated_at = NOW(3) WHERE status = " AH_SQ(AH_AGENT_S_DEPLOYING) " "
	           "AND updated_at < NOW(3) - INTERVAL 5 MINUTE AND NOT EXISTS (SELECT 1 FROM "
	           "deploy_jobs j WHERE j.agent_id = a.id AND j.state IN (" AH_SQ(AH_JOB_S_QUEUED) ", " AH_SQ(AH_JOB_S_RUNNING) "))", "");
	if (n > 0)
		ah_log_warn("%llu agent(s) were deploying without a job; set to error", n);
}

/* Images and sandboxes of agents that no longer exist (DELETE /agents removes
 * the row and tells us at once; `agenthost-admin user delete` and a missed
 * call leave it to this sweep). Only whole agent directories whose row is gone
 * are removed: anything finer would race the job loop's switch. */
static void gc_deleted_agents(ah_db *db, const struct ah_runner *r)
{
	char dir[PATH_MAX + 16];
	snprintf(dir, sizeof(dir), "%s/images", r->data_dir);
	DIR *d = opendir(dir);
	if (!d)
		return;
	ah_arena *a = ah_arena_new();
	struct dirent *de;
	while ((de = readdir(d))) {
		ah_rows rows;
		if (de->d_name[0] == '.' || strncmp(de->d_name, "agt_", 4) != 0)
			continue;
		if (ah_db_query(db, a, &rows, "SELECT 1 FROM agents WHERE id = ?", "s", de->d_name) != 0)
			break; /* database away: decide nothing */
		if (rows.n > 0)
			continue;
		ah_log_info("agent=%s deleted: removing its sandboxes and images", de->d_name);
		ah_warm_destroy_agent(de->d_name);
		ah_fuse_retain(de->d_name, NULL);
		ah_image_purge_agent(r, de->d_name);
	}
	closedir(d);
	ah_arena_destroy(a);
}

static void expire_session(const char *agent_id, const char *session, void *ctx)
{
	ah_db *db = ctx;
	ah_log_info("agent=%s session=%s: idle sandbox reclaimed", agent_id, session);
	ah_db_exec(db, NULL, "UPDATE sessions SET state = " AH_SQ(AH_SESSION_S_EXPIRED) ", sandbox_id = NULL "
	           "WHERE agent_id = ? AND id = ? AND state = " AH_SQ(AH_SESSION_S_ACTIVE), "ss", agent_id, session);
}

/* Spend rows of periods that are over (schema/027): nothing reads them. A
 * day's row is kept a day longer, for a call admitted before midnight. One
 * range of schema/034's index each: a DELETE of both at once (an OR) walked
 * the whole table, locking every current row on its way. */
static const char *const SQL_BUDGET_PURGE[] = {
	"DELETE FROM budget_spend WHERE period = " AH_SQ(AH_PERIOD_S_DAY)
	" AND period_start < UTC_DATE() - INTERVAL 1 DAY LIMIT 1000",
	"DELETE FROM budget_spend WHERE period = " AH_SQ(AH_PERIOD_S_MONTH)
	" AND period_start < DATE_FORMAT(UTC_DATE() - INTERVAL 1 DAY, '%Y-%m-01') LIMIT 1000",
};

/* A minute's share of retention: at most 20 batches, so a large backlog (the
 * first start after upgrading, a lowered retention) is worked off over minutes
 * without holding up the heartbeat. */
static void purge_history(ah_db *db, const ah_config *cfg)
{
	static ah_store *store;
	long long purged = 0;
	int released = 0;
	ah_err err = {0};
	if (ah_history_purge(db, ah_settings_of(cfg)->host.history_retention_days, AH_HISTORY_BATCH, 20,
	                     &purged, &err) != 0)
		ah_log_error("history retention: %s", err.msg);
	else if (purged > 0)
		ah_log_info("history retention: %lld invocations purged", purged);
	for (int i = 0; i < 2; i++)
		if (ah_db_exec(db, NULL, SQL_BUDGET_PURGE[i], "") != 0)
			ah_log_error("budget spend purge: %s", ah_db_error(db));
	/* The prompts and responses in the file store of invocations gone by
	 * retention or with their agent or user. */
	if (!store && ah_store_open(&store, cfg, &err) != 0) {
		ah_log_error("history blobs: %s", err.msg);
		store = NULL;
		return;
	}
	ah_arena *a = ah_arena_new();
	if (ah_history_blobs_sweep(db, store, a, NULL, 200, 1, &released, &err) != 0)
		ah_log_error("history blobs: %s", err.msg);
	else if (released > 0)
		ah_log_info("history blobs: %d released", released);
	ah_arena_destroy(a);
}

void *ah_heartbeat_thread(void *arg)
{
	struct ah_runner *r = arg;
	ah_db *db = NULL;
	ah_err err = {0};
	const ah_settings *set = ah_settings_of(r->cfg);
	int64_t idle_ms = set->runner.session_idle_seconds * 1000;
	int beat_ms = (int)set->runner.heartbeat_seconds * 1000;
	int lease_ms = r->lease_seconds * 1000 / 3;
	int64_t next_beat = 0, next_lease = 0, next_reap = 0, next_sweep = 0;
	while (!r->stopping) {
		int64_t now = ah_now_ms();
		if (!db && ah_db_open(&db, r->cfg, &err) != 0) {
			ah_log_error("heartbeat: %s; retrying", err.msg);
			ah_metrics_beat(false);
			db = NULL;
		}
		if (db && now >= next_lease) {
			renew_lease(db, r);
			next_lease = now + lease_ms;
		}
		if (db && now >= next_beat) {
			beat(db, r);
			next_beat = now + beat_ms;
		}
		if (db && now >= next_reap) {
			ah_sandboxes_reap_idle(idle_ms, expire_session, db);
			ah_fuse_reap_idle(set->buckets.mount_idle_seconds * 1000);
			next_reap = now + 10000;
		}
		if (db && now >= next_sweep) {
			sweep_lost_deploys(db);
			gc_deleted_agents(db, r);
			purge_history(db, r->cfg);
			ah_blob_cache_tidy(r->cfg);
			next_sweep = now + 60000;
		}
		usleep(200 * 1000);
	}
	ah_db_close(db);
	return NULL;
}
