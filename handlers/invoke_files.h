/* Managed files of an invocation (invoke_files.c). */
#ifndef AH_HANDLERS_INVOKE_FILES_H
#define AH_HANDLERS_INVOKE_FILES_H

#include "agents.h"

/* Adds the run request's "files": attachments, the session's outputs so far,
 * the quota left for new ones and the call's caps. */
int ah_invoke_files_request(ah_req *r, const ah_agent *a, const char *session_id, json_object *q);
/* Records the runner's "files_out" (session outputs, writable attachments);
 * returns the result's "files" list: [{"file_id","filename","size_bytes"}].
 * *error: why some were not kept (the runner's reason or the quota), or NULL. */
json_object *ah_invoke_files_record(ah_req *r, const ah_agent *a, const char *session_id,
                                    json_object *ans, const char **error);

#endif
