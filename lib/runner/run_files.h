/* Managed files in and out of a run's sandbox (run_files.c). */
#ifndef AH_RUNNER_RUN_FILES_H
#define AH_RUNNER_RUN_FILES_H

#include <json-c/json.h>

#include "core/config.h"
#include "core/err.h"
#include "files/files.h"
#include "sandbox/sandbox.h"

/* Before the run: attachments and a session's earlier outputs into /files. */
int ah_run_files_in(const ah_config *cfg, ah_sandbox *sb, json_object *files, ah_err *err);
/* After the run: new session outputs and changed writable attachments copied
 * out to files_dir/tmp, listed in ans as "files_out". */
void ah_run_files_out(const ah_config *cfg, ah_sandbox *sb, json_object *files, json_object *ans,
                      const char *tag);

/* The file store (files.h), opened once; NULL when it cannot be. */
const ah_store *ah_run_files_store(const ah_config *cfg);

#endif
