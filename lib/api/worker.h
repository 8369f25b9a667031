/* A FastCGI worker process and the listening sockets it accepts on. */
#ifndef AH_API_WORKER_H
#define AH_API_WORKER_H

#include "core/config.h"
#include "core/err.h"
#include "api/api.h"

/* Creates the unix socket at path with the owner group and mode nginx needs
 * (`socket_group`, `socket_mode`). Returns the fd or -1. */
int ah_worker_listen(const ah_config *cfg, const char *path, ah_err *err);

/* Accept loop of one worker of pool (AH_POOL_*), serving app's routes;
 * returns the exit status. */
int ah_worker_run(const ah_config *cfg, int listen_fd, int pool, const ah_api_app *app);

#endif
