/* The API's master process (api.h): the FastCGI front of the service. It opens two
 * unix sockets (CRUD and invoke), forks a pool of single-threaded workers on
 * each, respawns any that die, and on SIGTERM lets every worker finish its
 * current request before exiting. Invocations wait up to 600 s, so they get a
 * pool of their own and can never starve the short requests.
 *
 * SIGHUP (systemctl reload) re-reads the configuration: a new generation of
 * workers starts with it on the same listening sockets, then the old one gets
 * SIGTERM and each old worker exits once it has answered the request it holds,
 * so no request is refused or cut. A configuration that does not load is
 * refused with its key and line, and the workers running go on serving. */
#include "api/api.h"
#include "api/worker.h"
#include "auth/jwt.h"
#include "core/config.h"
#include "core/log.h"
#include "core/notify.h"
#include "core/metrics.h"
#include "core/settings.h"
#include "crypto/crypto.h"
#include "ratelimit/ratelimit.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* crud_workers and invoke_workers (256 each at most), the metrics worker,
 * the JWKS refresher and the app's background process. */
#define MAX_WORKERS (256 + 256 + 3)

/* The metrics pool is one worker on a socket of its own: a scrape never waits
 * behind the API's requests, however busy the other pools are. */
enum { POOL_CRUD = AH_POOL_CRUD, POOL_INVOKE = AH_POOL_INVOKE, POOL_METRICS = AH_POOL_METRICS,
       POOL_JWKS, POOL_BACKGROUND, NPOOLS = POOL_JWKS };

struct slot {
	pid_t pid;
	int pool;        /* POOL_*: which socket it serves, or the JWKS refresher */
	time_t started;
};

static volatile sig_atomic_t stopping, reloading;
static const ah_api_app *app;
static struct slot slots[MAX_WORKERS];
static int nslots;
/* Workers of earlier generations still finishing a request: waited for at a
 * stop, never respawned. */
static pid_t retiring[4 * MAX_WORKERS];
static int nretiring;
static sigset_t run_mask; /* the mask before the master blocked its signals */

static void on_term(int sig)
{
	(void)sig;
	stopping = 1;
}

static void on_hup(int sig)
{
	(void)sig;
	reloading = 1;
}

static void on_child(int sig)
{
	(void)sig; /* only to wake sigsuspend */
}

/* slot: the worker's place in slots[], and its counters' (core/metrics.h). */
static pid_t spawn(const ah_config *cfg, int fd, int pool, int slot)
{
	pid_t pid = fork();
	if (pid == 0) {
		ah_mx_use((unsigned)slot);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		signal(SIGHUP, SIG_IGN); /* a reload is the master's business */
		sigprocmask(SIG_SETMASK, &run_mask, NULL);
		_exit(pool == POOL_JWKS         ? ah_jwks_refresher_run(cfg)
		      : pool == POOL_BACKGROUND ? app->background(cfg)
		                                : ah_worker_run(cfg, fd, pool, app));
	}
	if (pid < 0)
		ah_log_error("fork failed: %s", strerror(errno));
	return pid;
}

static void respawn(const ah_config *cfg, const int fds[NPOOLS], pid_t dead, int status)
{
	for (int i = 0; i < nretiring; i++)
		if (retiring[i] == dead) { /* an old generation's: it has answered */
			retiring[i] = retiring[--nretiring];
			return;
		}
	for (int i = 0; i < nslots; i++) {
		if (slots[i].pid != dead)
			continue;
		if (WIFSIGNALED(status))
			ah_log_error("worker %d died of signal %d; respawning", (int)dead, WTERMSIG(status));
		else
			ah_log_warn("worker %d exited with %d; respawning", (int)dead, WEXITSTATUS(status));
		/* A worker that dies at once (database down) must not spin the CPU. */
		if (time(NULL) - slots[i].started < 1)
			sleep(1);
		int pool = slots[i].pool;
		slots[i].pid = spawn(cfg, pool >= NPOOLS ? -1 : fds[pool], pool, i);
		slots[i].started = time(NULL);
		return;
	}
}

/* fcgi_metrics_socket, or fcgi_socket's name with "-metrics" before its
 * ".sock": two APIs with sockets of their own never share this one either. */
static const char *metrics_socket(const ah_config *cfg, char *out, size_t n)
{
	const char *set = ah_settings_of(cfg)->api.fcgi_metrics_socket;
	if (*set)
		return set;
	const char *crud = ah_settings_of(cfg)->api.fcgi_socket;
	size_t len = strlen(crud);
	bool dot_sock = len > 5 && strcmp(crud + len - 5, ".sock") == 0;
	snprintf(out, n, "%.*s-metrics.sock", (int)(dot_sock ? len - 5 : len), crud);
	return out;
}

static void drain(void)
{
	for (int i = 0; i < nslots; i++)
		if (slots[i].pid > 0)
			kill(slots[i].pid, SIGTERM);
	/* Every child, the retiring ones too (they have had their SIGTERM). */
	time_t deadline = time(NULL) + 620; /* an invocation may run 600 s */
	while (time(NULL) < deadline)
		if (waitpid(-1, NULL, 0) < 0 && errno == ECHILD)
			break;
	for (int i = 0; i < nslots; i++)
		if (slots[i].pid > 0)
			kill(slots[i].pid, SIGKILL);
	for (int i = 0; i < nretiring; i++)
		kill(retiring[i], SIGKILL);
}

static int fds[NPOOLS];
static char paths[NPOOLS][4096];

/* One generation of workers with cfg in slots[]: each pool's count, and the
 * JWKS refresher when cfg has a JWKS URL. */
static void start_generation(const ah_config *cfg)
{
	/* crud_workers' default, 3 per CPU, is explained in core/config.c. */
	int counts[NPOOLS] = {(int)ah_settings_of(cfg)->api.crud_workers,
	                      (int)ah_settings_of(cfg)->api.invoke_workers, 1};
	/* JWTs from an identity provider: its keys are fetched by a process of
	 * their own, so that no worker ever waits on the provider. */
	static bool shared_jwks;
	const char *jwks = ah_set_opt(ah_settings_of(cfg)->jwt.jwks_url);
	if (jwks && *jwks && !shared_jwks)
		shared_jwks = ah_jwks_share_init() == 0;
	nslots = 0;
	for (int p = 0; p < NPOOLS; p++)
		for (int i = 0; i < counts[p]; i++) {
			slots[nslots] = (struct slot){spawn(cfg, fds[p], p, nslots), p, time(NULL)};
			nslots++;
		}
	if (jwks && *jwks && shared_jwks) {
		slots[nslots] = (struct slot){spawn(cfg, -1, POOL_JWKS, nslots), POOL_JWKS, time(NULL)};
		nslots++;
	}
	if (app->background) { /* the scheduler: its ticks are claimed in the
	                        * database, so an old generation's overlap is harmless */
		slots[nslots] = (struct slot){spawn(cfg, -1, POOL_BACKGROUND, nslots), POOL_BACKGROUND, time(NULL)};
		nslots++;
	}
	ah_log_info("listening on %s (%d workers), %s (%d workers) and %s (metrics)", paths[0],
	            counts[0], paths[1], counts[1], paths[2]);
}

/* What a worker needs of its configuration before it may serve; the master's
 * own settings (log format, master key) are taken on the way. */
static int load(ah_config **cfg, const char *path, ah_err *err)
{
	/* Before anything else: a JWKS URL any local user could serve is refused. */
	if (ah_config_load(cfg, path, err) != 0 || ah_log_configure(*cfg, err) != 0 ||
	    ah_jwks_url_check(*cfg, err) != 0 || ah_crypto_init(*cfg, 0, err) != 0) {
		ah_config_free(*cfg);
		*cfg = NULL;
		return AH_EINVALID;
	}
	return 0;
}

/* SIGHUP: the new generation starts before the old one is told to finish, so
 * that a worker is always there to accept. The sockets stay: a changed path
 * takes a restart. */
static void reload(ah_config **cfg, const char *path)
{
	ah_config *next = NULL;
	ah_err err = {0};
	if (load(&next, path, &err) != 0) {
		ah_log_error("reload refused, the running workers go on serving: %s", err.msg);
		ah_log_configure(*cfg, &err); /* the log format that was */
		return;
	}
	char mx_path[4096];
	const char *want[NPOOLS] = {ah_settings_of(next)->api.fcgi_socket,
	                            ah_settings_of(next)->api.fcgi_invoke_socket,
	                            metrics_socket(next, mx_path, sizeof(mx_path))};
	for (int p = 0; p < NPOOLS; p++)
		if (strcmp(want[p], paths[p]) != 0)
			ah_log_warn("reload: the socket %s stays until a restart (the configuration "
			            "now names %s)", paths[p], want[p]);
	pid_t old_pids[MAX_WORKERS];
	int old = 0;
	for (int i = 0; i < nslots; i++)
		if (slots[i].pid > 0) {
			old_pids[old++] = slots[i].pid;
			/* Reloads faster than requests end may fill the list: those
			 * are told to stop all the same, only not waited for. */
			if (nretiring < (int)(sizeof retiring / sizeof *retiring))
				retiring[nretiring++] = slots[i].pid;
		}
	start_generation(next);
	for (int i = 0; i < old; i++)
		kill(old_pids[i], SIGTERM);
	ah_log_info("reload: configuration %s read; %d old workers finish their requests and exit",
	            ah_cfg_path(next) ? ah_cfg_path(next) : "(environment)", old);
	ah_config_free(*cfg);
	*cfg = next;
}

static void handle_signals(void)
{
	sigset_t block;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGCHLD);
	/* Blocked but while waiting in sigsuspend: no signal falls between a
	 * check of the flags and the wait. */
	sigprocmask(SIG_BLOCK, &block, &run_mask);
	struct sigaction sa = {.sa_handler = on_term};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_hup;
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = on_child;
	sa.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
}

int ah_api_main(int argc, char **argv, const ah_api_app *the_app)
{
	ah_config *cfg = NULL;
	ah_err err = {0};
	app = the_app;
	ah_log_set_program("agenthost-api");
	const char *path = argc > 1 ? argv[1] : NULL;
	if (load(&cfg, path, &err) != 0) {
		ah_log_error("%s", err.msg);
		return 1;
	}
	char mx_path[4096];
	const char *want[NPOOLS] = {ah_settings_of(cfg)->api.fcgi_socket,
	                            ah_settings_of(cfg)->api.fcgi_invoke_socket,
	                            metrics_socket(cfg, mx_path, sizeof(mx_path))};
	for (int p = 0; p < NPOOLS; p++) {
		snprintf(paths[p], sizeof paths[p], "%s", want[p]);
		if ((fds[p] = ah_worker_listen(cfg, paths[p], &err)) < 0) {
			ah_log_error("%s", err.msg);
			return 1;
		}
	}
	/* Before forking: every worker, respawned ones too, shares the counters. */
	unsigned rl_slots = (unsigned)ah_settings_of(cfg)->api.rate_limit_slots;
	if (ah_ratelimit_init(rl_slots) != 0)
		ah_log_warn("no shared rate-limit table: counting every request in the database");
	/* Metrics: a slot of counters per worker, summed by whichever answers a
	 * scrape; room for every pool's maximum, which a reload may reach. */
	if (ah_mx_shared_init(MAX_WORKERS) != 0)
		ah_log_warn("no shared metrics: a scrape sees only the worker that answers it");
	/* glibc's strftime calls tzset(), which reads /etc/localtime the first
	 * time (auth's DATETIME text, on a worker's first request): read once
	 * here, every worker inherits the zone and none opens the file. */
	tzset();
	handle_signals();
	/* The sockets listen, and a connection waits in the backlog until a
	 * worker takes it: under systemd, `systemctl start` may return now.
	 * Before the fork: no worker inherits systemd's socket. */
	ah_notify_ready();
	start_generation(cfg);
	while (!stopping) {
		int status;
		pid_t p;
		while ((p = waitpid(-1, &status, WNOHANG)) > 0 && !stopping)
			respawn(cfg, fds, p, status);
		if (reloading && !stopping) {
			reloading = 0;
			reload(&cfg, path);
		} else if (!stopping) {
			sigsuspend(&run_mask);
		}
	}
	ah_log_info("SIGTERM: draining workers");
	drain();
	for (int p = 0; p < NPOOLS; p++)
		unlink(paths[p]);
	ah_config_free(cfg);
	return 0;
}
