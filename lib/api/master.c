/* The API's master process (api.h): the FastCGI front of the service. It opens two
 * unix sockets (CRUD and invoke), forks a pool of single-threaded workers on
 * each, respawns any that die, and on SIGTERM lets every worker finish its
 * current request before exiting. Invocations wait up to 600 s, so they get a
 * pool of their own and can never starve the short requests. */
#include "api/api.h"
#include "api/worker.h"
#include "auth/jwt.h"
#include "core/config.h"
#include "core/log.h"
#include "core/metrics.h"
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

static volatile sig_atomic_t stopping;
static const ah_api_app *app;
static struct slot slots[MAX_WORKERS];
static int nslots;

static void on_term(int sig)
{
	(void)sig;
	stopping = 1;
}

/* slot: the worker's place in slots[], and its counters' (core/metrics.h). */
static pid_t spawn(const ah_config *cfg, int fd, int pool, int slot)
{
	pid_t pid = fork();
	if (pid == 0) {
		ah_mx_use((unsigned)slot);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
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
	const char *set = ah_cfg_str(cfg, AH_CFG_FCGI_METRICS_SOCKET);
	if (*set)
		return set;
	const char *crud = ah_cfg_str(cfg, AH_CFG_FCGI_SOCKET);
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
	time_t deadline = time(NULL) + 620; /* an invocation may run 600 s */
	int alive = nslots;
	while (alive > 0 && time(NULL) < deadline) {
		pid_t p = waitpid(-1, NULL, 0);
		if (p > 0)
			alive--;
		else if (errno == ECHILD)
			break;
	}
	for (int i = 0; i < nslots; i++)
		if (slots[i].pid > 0)
			kill(slots[i].pid, SIGKILL);
}

int ah_api_main(int argc, char **argv, const ah_api_app *the_app)
{
	ah_config *cfg = NULL;
	ah_err err = {0};
	app = the_app;
	ah_log_set_program("agenthost-api");
	/* Before anything else: a JWKS URL any local user could serve is refused. */
	if (ah_config_load(&cfg, argc > 1 ? argv[1] : NULL, &err) != 0 ||
	    ah_log_configure(cfg, &err) != 0 || ah_jwks_url_check(cfg, &err) != 0 ||
	    ah_crypto_init(cfg, 0, &err) != 0) {
		ah_log_error("%s", err.msg);
		ah_config_free(cfg);
		return 1;
	}
	int fds[NPOOLS];
	char mx_path[4096];
	const char *paths[NPOOLS] = {ah_cfg_str(cfg, AH_CFG_FCGI_SOCKET),
	                             ah_cfg_str(cfg, AH_CFG_FCGI_INVOKE_SOCKET),
	                             metrics_socket(cfg, mx_path, sizeof(mx_path))};
	/* crud_workers' default, 3 per CPU, is explained in core/config.c. */
	int counts[NPOOLS] = {(int)ah_cfg_int(cfg, AH_CFG_CRUD_WORKERS),
	                      (int)ah_cfg_int(cfg, AH_CFG_INVOKE_WORKERS), 1};
	for (int p = 0; p < NPOOLS; p++)
		if ((fds[p] = ah_worker_listen(cfg, paths[p], &err)) < 0) {
			ah_log_error("%s", err.msg);
			return 1;
		}
	/* Before forking: every worker, respawned ones too, shares the counters. */
	unsigned rl_slots = (unsigned)ah_cfg_int(cfg, AH_CFG_RATE_LIMIT_SLOTS);
	if (ah_ratelimit_init(rl_slots) != 0)
		ah_log_warn("no shared rate-limit table: counting every request in the database");
	/* JWTs from an identity provider: its keys are fetched by a process of
	 * their own, so that no worker ever waits on the provider. */
	const char *jwks = ah_cfg_opt(cfg, AH_CFG_JWT_JWKS_URL);
	bool refresher = jwks && *jwks && ah_jwks_share_init() == 0;
	/* Metrics: a slot of counters per worker, summed by whichever answers a scrape. */
	if (ah_mx_shared_init((unsigned)(counts[0] + counts[1] + counts[2] + 2)) != 0)
		ah_log_warn("no shared metrics: a scrape sees only the worker that answers it");
	struct sigaction sa = {.sa_handler = on_term};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	for (int p = 0; p < NPOOLS; p++)
		for (int i = 0; i < counts[p]; i++) {
			slots[nslots] = (struct slot){spawn(cfg, fds[p], p, nslots), p, time(NULL)};
			nslots++;
		}
	if (refresher) {
		slots[nslots] = (struct slot){spawn(cfg, -1, POOL_JWKS, nslots), POOL_JWKS, time(NULL)};
		nslots++;
	}
	if (app->background) {
		slots[nslots] = (struct slot){spawn(cfg, -1, POOL_BACKGROUND, nslots), POOL_BACKGROUND, time(NULL)};
		nslots++;
	}
	ah_log_info("listening on %s (%d workers), %s (%d workers) and %s (metrics)", paths[0],
	            counts[0], paths[1], counts[1], paths[2]);
	while (!stopping) {
		int status;
		pid_t p = waitpid(-1, &status, 0);
		if (p > 0 && !stopping)
			respawn(cfg, fds, p, status);
	}
	ah_log_info("SIGTERM: draining workers");
	drain();
	for (int p = 0; p < NPOOLS; p++)
		unlink(paths[p]);
	ah_config_free(cfg);
	return 0;
}
