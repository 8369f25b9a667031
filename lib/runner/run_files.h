/* Managed files in and out of a run's sandbox (run_files.c). */
#ifndef AH_RUNNER_RUN_FILES_H
#define AH_RUNNER_RUN_FILES_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "core/err.h"
#include "files/files.h"
#include "sandbox/sandbox.h"

/* Deadlines are ah_rf_now() milliseconds (a monotonic clock; run_files_int.h):
 * a call's own timeout, which the placing and collecting of its files count
 * in; 0 for none (a warm process made ahead of its call). */

/* Before the run: attachments and a session's earlier outputs into /files.
 * reused: the sandbox ran a call before (a session's), so its /files/agent
 * may hold that call's attachments. */
int ah_run_files_in(const ah_config *cfg, ah_sandbox *sb, json_object *files, bool reused,
                    int64_t deadline, ah_err *err);
/* After the run (run_collect.c): new session outputs and changed writable
 * attachments copied out to files_dir/tmp within the call's caps and time,
 * listed in ans as "files_out" ({"session", "attach", and "error" when some
 * were not kept: the message for the user}). */
void ah_run_files_out(const ah_config *cfg, ah_sandbox *sb, json_object *files, json_object *ans,
                      int64_t deadline, const char *tag);

/* The file store (files.h), opened once; NULL when it cannot be. */
const ah_store *ah_run_files_store(const ah_config *cfg);

#endif
