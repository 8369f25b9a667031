/* Shared by run_files.c (files into a run) and run_collect.c (its outputs
 * out of it): programs run in the sandbox as the agent, within a deadline. */
#ifndef AH_RUNNER_RUN_FILES_INT_H
#define AH_RUNNER_RUN_FILES_INT_H

#include "runner/run_files.h"

#include <stdbool.h>
#include <stdint.h>

/* Milliseconds of a monotonic clock: the deadlines of run_files.h. */
int64_t ah_rf_now(void);

/* sh -c script with args, as the agent; stdout into out_fd (capped) or
 * memory. Each program gets at most two minutes, and never past deadline
 * (0: none): AH_ETIMEOUT once it is reached. */
int ah_rf_sh(ah_sandbox *sb, const char *script, const char *a1, const char *a2, const void *in,
             size_t in_len, int out_fd, size_t max_out, int64_t deadline, ah_sandbox_result *res,
             ah_err *err);

/* Whether each of dirs (NULL-terminated, relative to the sandbox's root)
 * exists and is empty, looked at through the sandbox's /proc root without
 * following a link (no program run in the sandbox). */
bool ah_rf_dirs_empty(ah_sandbox *sb, const char *const *dirs);

/* An attachment entry of a run request the agent may write ("ro": false). */
bool ah_rf_writable(json_object *e);

/* o's string or array member k, else NULL. */
const char *ah_rf_str(json_object *o, const char *k);
json_object *ah_rf_arr(json_object *o, const char *k);

#endif
