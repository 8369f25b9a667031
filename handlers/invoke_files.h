/* Managed files of an invocation (invoke_files.c). */
#ifndef AH_HANDLERS_INVOKE_FILES_H
#define AH_HANDLERS_INVOKE_FILES_H

#include "agents.h"
#include "db/enums.h"

/* What a run request's "files" are made of, as rows of the invocation's first
 * statement (invoke.c reads them with the secrets: one round trip, issue 31):
 * its parameters are the agent's id twice, the session's id and the user's,
 * its rows a kind and four cells: the attachments ('a'), the session's files
 * ('s') and the user's free quota ('q'). */
#define AH_INVOKE_FILES_SQL                                                                    \
	"SELECT 'a', f.id, f.sha256, af.mount_path, af.read_only FROM agent_files af"             \
	" JOIN files f ON f.id = af.file_id WHERE af.agent_id = ? AND f.status = " AH_SQ(AH_FILE_S_CONFIRMED)      \
	" UNION ALL SELECT 's', filename, sha256, size_bytes, NULL FROM files WHERE agent_id = ?" \
	" AND session_id = ? AND scope = " AH_SQ(AH_SCOPE_S_SESSION) " AND status = " AH_SQ(AH_FILE_S_CONFIRMED)                        \
	" UNION ALL SELECT 'q', quota_bytes - storage_used_bytes, NULL, NULL, NULL FROM users WHERE id = ?"

/* Adds the run request's "files" from those rows (rows[i][0] is the kind):
 * attachments, the session's outputs so far, the quota left for new ones and
 * the call's caps. */
void ah_invoke_files_request(ah_req *r, char ***rows, size_t n, json_object *q);
/* Records the runner's "files_out" (session outputs, writable attachments);
 * returns the result's "files" list: [{"file_id","filename","size_bytes"}].
 * *error: why some were not kept (the runner's reason or the quota), or NULL. */
json_object *ah_invoke_files_record(ah_req *r, const ah_agent *a, const char *session_id,
                                    json_object *ans, const char **error);

#endif
