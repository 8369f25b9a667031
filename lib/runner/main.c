/* agenthost-runner: start-up, signals and shutdown, in that order.
 *
 * Start-up: config, absolute paths (image paths go into the database and are
 * read by other processes), socket (refused while another runner answers on
 * it), sandboxes, database, registration in `runners`, jobs this runner id held
 * when it died made claimable at once, pid file, threads. Signals are blocked in every thread and taken by sigwait here.
 *
 * SIGTERM/SIGINT: stop claiming and accepting; let runs in flight and the job
 * in progress finish within a grace period; a job still running after that goes
 * back to the queue (its attempt not counted); destroy every sandbox; exit. */
#include "runner/runner.h"
#include "runner/gateway.h"
#include "rpc/rpc.h"
#include "runner/sandboxes.h"
#include "runner/warm.h"
#include "runner/fuse.h"
#include "core/log.h"
#include "core/notify.h"
#include "core/util.h"
#include "deploy/deploy.h"
#include "sandbox/sandbox.h"

#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* An existing absolute directory for a configured (maybe relative) one. */
static int absolute_dir(char *out, const char *dir, ah_err *err)
{
	int rc = ah_deploy_mkdirs(dir, err);
	if (rc == 0 && !realpath(dir, out))
		rc = ah_err_set(err, AH_EFAIL, "%s: %s", dir, strerror(errno));
	return rc;
}

static int setup_paths(struct ah_runner *r, ah_err *err)
{
	char dir[PATH_MAX], base[NAME_MAX + 1], abs[PATH_MAX];
	const char *sock = ah_settings_of(r->cfg)->runner.socket;
	snprintf(dir, sizeof(dir), "%s", sock);
	snprintf(base, sizeof(base), "%s", basename(dir));
	snprintf(dir, sizeof(dir), "%s", sock);
	int rc = absolute_dir(abs, dirname(dir), err);
	if (rc == 0)
		rc = absolute_dir(r->data_dir, ah_settings_of(r->cfg)->host.data_dir, err);
	/* Uploaded code, images and builds are strangers' files: no other local
	 * account may reach any of them, whatever a mode below says. */
	if (rc == 0 && chmod(r->data_dir, 0700) != 0)
		rc = ah_err_set(err, AH_EFAIL, "chmod 0700 %s: %s", r->data_dir, strerror(errno));
	if (rc != 0)
		return rc;
	if ((size_t)snprintf(r->socket_path, sizeof(r->socket_path), "%s/%s", abs, base) >=
	    sizeof(r->socket_path))
		return ah_err_set(err, AH_EFAIL, "socket path too long");
	const char *pid = ah_settings_of(r->cfg)->runner.pid_file;
	if (*pid)
		snprintf(r->pid_file, sizeof(r->pid_file), "%s", pid);
	else if ((size_t)snprintf(r->pid_file, sizeof(r->pid_file), "%s/runner.pid", abs) >=
	         sizeof(r->pid_file))
		return ah_err_set(err, AH_EFAIL, "pid file path too long");
	return 0;
}

static int write_pid_file(const struct ah_runner *r)
{
	FILE *f = fopen(r->pid_file, "w");
	if (!f)
		return AH_EFAIL;
	fprintf(f, "%d\n", (int)getpid());
	return fclose(f) == 0 ? 0 : AH_EFAIL;
}

/* MariaDB may still be starting (scripts start everything at once). */
static int open_db_patiently(ah_db **db, const struct ah_runner *r, ah_err *err)
{
	for (int i = 0; i < 30; i++) {
		if (ah_db_open(db, r->cfg, err) == 0)
			return 0;
		ah_log_warn("database not reachable (%s); retrying", err->msg);
		sleep(1);
	}
	return AH_EFAIL;
}

static int start(struct ah_runner *r, ah_db **db, ah_err *err)
{
	/* A gateway setting that cannot work stops the start before anything is
	 * made, not the first agent's call. */
	int rc = ah_settings_of(r->cfg)->model.gateway ? ah_gateway_check_config(r->cfg, err) : 0;
	if (rc != 0 || (rc = setup_paths(r, err)) != 0)
		return rc;
	ah_runner_local_id(r->cfg, r->id, sizeof(r->id)); /* the socket's dir exists now */
	r->capacity = (int)ah_settings_of(r->cfg)->runner.capacity;
	r->lease_seconds = (int)ah_settings_of(r->cfg)->deploy.lease_seconds;
	r->max_attempts = (int)ah_settings_of(r->cfg)->deploy.max_attempts;
	pthread_mutex_init(&r->job_mu, NULL);
	ah_sandboxes_init(ah_settings_of(r->cfg)->runner.session_give_way_seconds * 1000);
	if ((rc = ah_gateway_global_init(err)) != 0)
		return rc;
	/* The socket first: it is what tells a second runner with this id that the
	 * first is alive, before it can clean up (sandboxes, leases) under it. */
	if ((rc = ah_server_listen(r, err)) != 0 || (rc = ah_metrics_listen(r, err)) != 0 ||
	    (rc = ah_sandbox_init(&ah_settings_of(r->cfg)->sandbox, err)) != 0 ||
	    (rc = ah_fuse_init(r->cfg, r->data_dir, err)) != 0)
		return rc;
	if ((rc = open_db_patiently(db, r, err)) != 0 ||
	    (rc = ah_heartbeat_register(*db, r, err)) != 0)
		return rc;
	ah_jobs_expire_own(*db, r);
	/* Nothing builds yet: whatever is in build/ was left by a killed run. */
	char build[PATH_MAX + 8];
	snprintf(build, sizeof(build), "%s/build", r->data_dir);
	ah_deploy_rmtree(build);
	if (write_pid_file(r) != 0)
		ah_log_warn("cannot write %s", r->pid_file);
	ah_log_info("runner %s ready: socket %s, address %s, data %s, capacity %d", r->id,
	            r->socket_path, r->address, r->data_dir, r->capacity);
	return 0;
}

static void wait_for_signal(void)
{
	sigset_t set;
	int sig = 0;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	for (;;) {
		if (sigwait(&set, &sig) == 0 && sig != SIGHUP)
			break;
	}
	ah_log_info("signal %d: shutting down", sig);
}

static void stop(struct ah_runner *r, ah_db *db, pthread_t jobs, pthread_t beat, pthread_t srv,
                 pthread_t warm, pthread_t mx)
{
	int grace = (int)ah_settings_of(r->cfg)->runner.shutdown_grace_seconds;
	r->stopping = 1;
	pthread_join(srv, NULL);
	ah_server_stop(grace * 1000);
	struct timespec ts = ah_deadline_in_ms(grace * 1000LL);
	if (pthread_timedjoin_np(jobs, NULL, &ts) != 0) {
		pthread_mutex_lock(&r->job_mu);
		long long job = r->current_job;
		pthread_mutex_unlock(&r->job_mu);
		ah_log_warn("job=%lld still running after %d s; giving it back to the queue", job, grace);
		if (job)
			ah_jobs_release(db, r, job);
	}
	pthread_join(beat, NULL);
	pthread_join(mx, NULL);
	ah_warm_stop();
	pthread_join(warm, NULL);
	ah_sandboxes_destroy_all();
	ah_fuse_shutdown();
	ah_sandbox_shutdown();
	unlink(r->pid_file);
}

int main(int argc, char **argv)
{
	static struct ah_runner r;
	ah_config *cfg = NULL;
	ah_db *db = NULL;
	ah_err err = {0};
	ah_log_set_program("agenthost-runner");
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* inherited by every thread: sigwait takes them */
	signal(SIGPIPE, SIG_IGN);
	const char *path = argc > 2 && strcmp(argv[1], "--config") == 0 ? argv[2] : NULL;
	if (sodium_init() < 0 || ah_config_load(&cfg, path, &err) != 0 ||
	    ah_log_configure(cfg, &err) != 0) {
		ah_log_error("start-up failed: %s", err.msg[0] ? err.msg : "libsodium");
		return 1;
	}
	r.cfg = cfg;
	if (start(&r, &db, &err) != 0) {
		ah_log_error("start-up failed: %s", err.msg);
		return 1;
	}
	pthread_t jobs, beat, srv, warm, mx;
	if (pthread_create(&srv, NULL, ah_server_thread, &r) != 0 ||
	    pthread_create(&mx, NULL, ah_metrics_thread, &r) != 0 ||
	    pthread_create(&warm, NULL, ah_warm_thread, &r) != 0 ||
	    pthread_create(&beat, NULL, ah_heartbeat_thread, &r) != 0 ||
	    pthread_create(&jobs, NULL, ah_jobs_thread, &r) != 0) {
		ah_log_error("cannot start threads");
		return 1;
	}
	ah_notify_ready(); /* its socket listens since start() */
	wait_for_signal();
	stop(&r, db, jobs, beat, srv, warm, mx);
	ah_db_close(db);
	ah_config_free(cfg);
	ah_log_info("stopped");
	return 0;
}
