/* /agents/{slug}/files: the user's files attached to an agent. An attached
 * file appears in the agent's sandboxes at mount_path (default
 * /files/agent/<filename>), read-only unless attached with read_only false; a
 * writable one's changes are saved back to the file after each invocation.
 *
 * When it takes effect: the runner rebuilds /files/agent/ before every run
 * (lib/runner/run_files.c), so an attachment or detachment applies from the
 * agent's next invocation on, in new and session sandboxes alike. As the
 * contract asks, a change also sets needs_redeploy (a redeploy is not needed
 * for the files themselves). Deleting a file detaches it everywhere (the
 * agent_files rows cascade). */
#include "agents.h"
#include "files_api.h"
#include "routes.h"
#include "list.h"
#include "core/util.h"

#include <string.h>

#define ATT_COLS                                                                       \
	"af.file_id, f.filename, f.size_bytes, f.content_type, af.mount_path, af.read_only," \
	" af.created_at"
/* Oldest first: a deferred join for offset pages, a key range for cursors. */
enum { ATT_FILE_ID = 0, ATT_CREATED = 6 };
#define ATT_ORDER " ORDER BY af.created_at, af.file_id"
static const char SQL_LIST[] =
	"SELECT " ATT_COLS " FROM (SELECT agent_id, file_id FROM agent_files WHERE agent_id = ?"
	" ORDER BY created_at, file_id LIMIT ? OFFSET ?) k"
	" JOIN agent_files af ON af.agent_id = k.agent_id AND af.file_id = k.file_id"
	" JOIN files f ON f.id = af.file_id" ATT_ORDER;
static const char SQL_LIST_AFTER[] =
	"SELECT " ATT_COLS " FROM agent_files af FORCE INDEX (agent_files_agent_created)"
	" JOIN files f ON f.id = af.file_id WHERE af.agent_id = ? AND af.created_at >= ? AND (af.created_at > ? OR af.file_id > ?)"
	ATT_ORDER " LIMIT ?";
static const char SQL_GET[] =
	"SELECT " ATT_COLS " FROM agent_files af JOIN files f ON f.id = af.file_id"
	" WHERE af.agent_id = ? AND af.file_id = ?";
static const char SQL_TAKEN[] =
	"SELECT file_id FROM agent_files WHERE agent_id = ? AND (file_id = ? OR mount_path = ?)";
static const char SQL_INSERT[] =
	"INSERT INTO agent_files (agent_id, file_id, mount_path, read_only, created_at)"
	" VALUES (?, ?, ?, ?, NOW(3))";
static const char SQL_DELETE[] = "DELETE FROM agent_files WHERE agent_id = ? AND file_id = ?";
static const char SQL_REDEPLOY[] =
	"UPDATE agents SET needs_redeploy = (deployed_at IS NOT NULL), updated_at = NOW(3) WHERE id = ?";

typedef struct attachment {
	const char *file_id, *filename;
	long long size;
	const char *content_type, *mount_path;
	bool read_only;
	const char *created_at;
} attachment;

static const ah_col ATT_COLUMNS[] = {
	AH_COL_S("af.file_id", attachment, file_id),
	AH_COL_S("f.filename", attachment, filename),
	AH_COL_I("f.size_bytes", attachment, size, 0),
	AH_COL_S("f.content_type", attachment, content_type),
	AH_COL_S("af.mount_path", attachment, mount_path),
	AH_COL_B("af.read_only", attachment, read_only),
	AH_COL_S("af.created_at", attachment, created_at),
};
#define ATT_NCOLS (sizeof(ATT_COLUMNS) / sizeof(ATT_COLUMNS[0]))

static json_object *att_json(ah_req *r, const ah_rows *rows, size_t i)
{
	static bool checked;
	attachment t;
	AH_RECORD_CHECK(checked, ATT_COLUMNS, ATT_NCOLS, ATT_COLS);
	ah_record_fill(&t, ATT_COLUMNS, ATT_NCOLS, rows->v[i]);
	json_object *o = json_object_new_object();
	ah_json_str(o, "file_id", t.file_id);
	ah_json_str(o, "filename", t.filename);
	ah_json_int(o, "size_bytes", t.size);
	ah_json_str(o, "content_type", t.content_type);
	ah_json_str(o, "mount_path", t.mount_path);
	ah_json_bool(o, "read_only", t.read_only);
	ah_json_time(r, o, "created_at", t.created_at);
	return o;
}

static int list_attachments(ah_req *r)
{
	static const ah_list list = {.page_sql = SQL_LIST, .after_sql = SQL_LIST_AFTER, .count_kind = "att",
	                             .ascending = true,
	                             .time_col = ATT_CREATED, .id_col = ATT_FILE_ID, .to_json = att_json};
	const ah_agent *a;
	int rc = ah_agent_load(r, &a);
	return rc ? rc : ah_list_keyset(r, &list, a->id, NULL, 0);
}

static int attach(ah_req *r)
{
	static const char *const fields[] = {"file_id", "mount_path", "read_only", NULL};
	const ah_agent *a;
	json_object *o;
	const char *fid, *mp;
	char *norm = NULL;
	bool ro = true;
	ah_file f;
	ah_rows rows;
	int rc = ah_agent_load(r, &a);
	if (rc != 0 || (rc = ah_body_object(r, &o, fields)) != 0)
		return rc;
	ah_field_str(r, o, "file_id", AH_F_REQUIRED, 1, 32, &fid, NULL);
	ah_field_str(r, o, "mount_path", AH_F_NULLABLE, 1, 1024, &mp, NULL);
	ah_field_bool(r, o, "read_only", 0, &ro, NULL);
	if (mp && ah_mount_path_problem(r->arena, mp, &norm))
		ah_verr(r, "body", "mount_path", ah_mount_path_problem(r->arena, mp, &norm), "value_error");
	if (ah_verr_reply(r) != 0 || (rc = ah_file_load(r, fid, false, &f)) != 0)
		return rc ? rc : AH_EDONE;
	if (f.status != AH_FILE_CONFIRMED)
		return ah_reply_error(r, 409, "The file's upload has not been confirmed yet");
	if (!mp && ah_mount_path_problem(r->arena, ah_sprintf(r->arena, AH_MOUNT_ROOT "%s", f.filename), &norm))
		return ah_reply_error(r, 409, "The filename cannot be a mount path; give mount_path");
	if (ah_db_query(r->db, r->arena, &rows, SQL_TAKEN, "sss", a->id, f.id, norm) != 0)
		return AH_EFAIL;
	if (rows.n)
		return ah_reply_error(r, 409, strcmp(rows.v[0][0], f.id) == 0
		                      ? "The file is already attached to this agent"
		                      : "Another attached file has this mount_path");
	rc = ah_db_exec(r->db, NULL, SQL_INSERT, "sssi", a->id, f.id, norm, (long long)ro);
	if (rc == AH_ECONFLICT)
		return ah_reply_error(r, 409, "The file is already attached to this agent");
	if (rc != 0 || ah_db_exec(r->db, NULL, SQL_REDEPLOY, "s", a->id) != 0 ||
	    ah_db_query(r->db, r->arena, &rows, SQL_GET, "ss", a->id, f.id) != 0 || rows.n != 1)
		return AH_EFAIL;
	return ah_reply_json(r, 201, att_json(r, &rows, 0));
}

static int detach(ah_req *r)
{
	const ah_agent *a;
	unsigned long long n = 0;
	int rc = ah_agent_load(r, &a);
	if (rc != 0)
		return rc;
	if (ah_db_exec(r->db, &n, SQL_DELETE, "ss", a->id, r->params[1]) != 0)
		return AH_EFAIL;
	if (n == 0)
		return ah_reply_error(r, 404, "Attachment not found");
	if (ah_db_exec(r->db, NULL, SQL_REDEPLOY, "s", a->id) != 0)
		return AH_EFAIL;
	return ah_reply_no_content(r);
}

const ah_route ah_agent_files_routes[] = {
	{"GET", "/agents/{slug}/files", list_attachments, 0, 0, AH_AGENT_SCOPE},
	{"POST", "/agents/{slug}/files", attach, 0, 0, AH_AGENT_SCOPE},
	{"DELETE", "/agents/{slug}/files/{file_id}", detach, 0, 0, AH_AGENT_SCOPE},
	{NULL, NULL, NULL, 0, 0, NULL},
};
