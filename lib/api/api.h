/* The API server as a framework: a master process with two pools of FastCGI
 * workers (CRUD and invocations) that match each request against the route
 * tables a program hands in. The program (handlers/main.c) knows the
 * resources; this module knows none of them. */
#ifndef AH_API_API_H
#define AH_API_API_H

#include "core/config.h"
#include "core/err.h"
#include "http/router.h"

/* AH_POOL_METRICS: one worker answering Prometheus scrapes alone, without a
 * database connection (metrics are wanted most when the database is away). */
enum { AH_POOL_CRUD = 0, AH_POOL_INVOKE = 1, AH_POOL_METRICS = 2 };

typedef struct ah_api_app {
	const ah_route *const *routes;   /* every resource's table, NULL-terminated */
	/* Start-up work of one worker of a pool (AH_POOL_*), before it accepts:
	 * a failure stops that worker with the message. NULL: none. */
	int (*init_pool)(const ah_config *cfg, int pool, ah_err *err);
	/* A process of the program's own the master keeps running beside the
	 * workers (respawned, drained like them), e.g. the scheduler; its return
	 * is the exit status. NULL: none. */
	int (*background)(const ah_config *cfg);
} ah_api_app;

/* The master: reads the configuration (argv[1] or AGENTHOST_CONFIG), opens the
 * sockets, forks and respawns the workers, drains them on SIGTERM. Returns the
 * process's exit status. */
int ah_api_main(int argc, char **argv, const ah_api_app *app);

#endif
