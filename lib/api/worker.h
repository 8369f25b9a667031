/* A FastCGI worker process and the listening sockets it accepts on. */
#ifndef AH_API_WORKER_H
#define AH_API_WORKER_H

#include "core/config.h"
#include "core/err.h"

/* Creates the unix socket at path with the owner group and mode nginx needs
 * (`socket_group`, `socket_mode`). Returns the fd or -1. */
int ah_worker_listen(const ah_config *cfg, const char *path, ah_err *err);

/* Accept loop of one worker; returns the exit status. pool 1 = invocations. */
int ah_worker_run(const ah_config *cfg, int listen_fd, int pool);



/* Per-pool start-up work (e.g. the tokenizer vocabulary for the invoke pool). */
int ah_worker_init_pool(const ah_config *cfg, int pool, ah_err *err);
#endif
