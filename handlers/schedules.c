/* /agents/{slug}/schedules (issue 32): an agent invoked with a prompt at the
 * times of a cron expression in an IANA time zone. This file is the records:
 * create (with the next five run times), list, read, change (pause, resume,
 * a new expression or prompt), delete; a schedule goes with its agent (the
 * foreign key). Running them is schedule_run.c's.
 *
 * Every time here is the database's: "now" is its clock, so API hosts with
 * clocks apart agree on what is due. next_run_at is the tick to run next;
 * pausing clears it, and resuming or a new expression sets it to the first
 * tick after now (ticks missed while paused never run). */
#include "agents.h"
#include "invocations.h"
#include "list.h"
#include "routes.h"
#include "schedules.h"
#include "webhooks.h"
#include "validate.h"
#include "core/util.h"
#include "cron/cron.h"
#include "db/record.h"

#include <string.h>

#define NEXT_RUNS 5
/* A schedule's prompt is kept and sent again at every tick: 64 KiB at most
 * (and never more than max_prompt_bytes, which its runs must pass). */
#define PROMPT_MAX (64 * 1024)

#define SCHEDULE_COLS                                                                     \
	"id, cron, timezone, prompt, session_id, webhook_url, paused, next_run_at,"          \
	" FLOOR(UNIX_TIMESTAMP(next_run_at)), last_run_at, last_invocation_id, last_status,"        \
	" last_error, run_count, created_at, updated_at"
static const ah_col SCHEDULE_COLUMNS[] = {
	AH_COL_S("id", ah_schedule, id),
	AH_COL_S("cron", ah_schedule, cron),
	AH_COL_S("timezone", ah_schedule, timezone),
	AH_COL_S("prompt", ah_schedule, prompt),
	AH_COL_S("session_id", ah_schedule, session_id),
	AH_COL_S("webhook_url", ah_schedule, webhook_url),
	AH_COL_B("paused", ah_schedule, paused),
	AH_COL_S("next_run_at", ah_schedule, next_run_at),
	AH_COL_I("FLOOR(UNIX_TIMESTAMP(next_run_at))", ah_schedule, next_run_unix, 0),
	AH_COL_S("last_run_at", ah_schedule, last_run_at),
	AH_COL_S("last_invocation_id", ah_schedule, last_invocation_id),
	AH_COL_S("last_status", ah_schedule, last_status),
	AH_COL_S("last_error", ah_schedule, last_error),
	AH_COL_I("run_count", ah_schedule, run_count, 0),
	AH_COL_S("created_at", ah_schedule, created_at),
	AH_COL_S("updated_at", ah_schedule, updated_at),
};
#define SCHEDULE_NCOLS (sizeof(SCHEDULE_COLUMNS) / sizeof(SCHEDULE_COLUMNS[0]))

static const char SQL_LIST[] = "SELECT " SCHEDULE_COLS " FROM schedules WHERE agent_id = ?"
                               " ORDER BY created_at, id LIMIT ? OFFSET ?";
static const char SQL_COUNT[] = "SELECT COUNT(*) FROM schedules WHERE agent_id = ?";
static const char SQL_GET[] = "SELECT " SCHEDULE_COLS " FROM schedules WHERE agent_id = ? AND id = ?";
static const char SQL_NOW[] = "SELECT UNIX_TIMESTAMP()";
static const char SQL_INSERT[] =
	"INSERT INTO schedules (id, agent_id, cron, timezone, prompt, session_id, webhook_url, paused,"
	" next_run_at, created_at, updated_at)"
	" VALUES (?, ?, ?, ?, ?, ?, ?, ?, IF(? = 0, NULL, FROM_UNIXTIME(?)), NOW(3), NOW(3))";
static const char SQL_UPDATE[] =
	"UPDATE schedules SET cron = ?, timezone = ?, prompt = ?, session_id = ?, webhook_url = ?,"
	" paused = ?, next_run_at = IF(?, IF(? = 0, NULL, FROM_UNIXTIME(?)), next_run_at),"
	" updated_at = NOW(3)"
	" WHERE agent_id = ? AND id = ?";
static const char SQL_DELETE[] = "DELETE FROM schedules WHERE agent_id = ? AND id = ?";

const ah_schedule *ah_schedule_from_row(ah_arena *a, char *const *row)
{
	static bool checked;
	ah_schedule *s = ah_alloc(a, sizeof(*s));
	AH_RECORD_CHECK(checked, SCHEDULE_COLUMNS, SCHEDULE_NCOLS, SCHEDULE_COLS);
	ah_record_fill(s, SCHEDULE_COLUMNS, SCHEDULE_NCOLS, row);
	return s;
}

/* The database's clock, Unix seconds. */
int ah_schedule_db_now(ah_db *db, ah_arena *a, long long *out)
{
	ah_rows rows;
	if (ah_db_query(db, a, &rows, SQL_NOW, "") != 0 || rows.n != 1 || !rows.v[0][0])
		return AH_EFAIL;
	return ah_parse_ll(out, rows.v[0][0]) == 0 ? 0 : AH_EFAIL;
}

/* The first tick after `after`, or 0 when there is none (cannot happen for
 * an expression that parsed: its dates occur). */
long long ah_schedule_next(const char *cron, const char *zone, long long after)
{
	ah_cron c;
	int64_t t = 0;
	if (ah_cron_parse(&c, cron, NULL, 0) != 0 || ah_cron_next(&t, &c, zone, after) != 0)
		return 0;
	return (long long)t;
}

static json_object *time_json(ah_req *r, long long unix_s)
{
	const char *t = ah_db_time_to_rfc3339(r->arena, ah_db_time(r->arena, (int64_t)unix_s * 1000));
	return json_object_new_string(t);
}

/* next_run_at and the four ticks after it; none while paused. */
static json_object *next_runs_json(ah_req *r, const ah_schedule *s)
{
	json_object *arr = json_object_new_array();
	long long t = s->next_run_at ? s->next_run_unix : 0;
	for (int i = 0; i < NEXT_RUNS && t > 0; i++) {
		json_object_array_add(arr, time_json(r, t));
		t = ah_schedule_next(s->cron, s->timezone, t);
	}
	return arr;
}

static json_object *schedule_json(ah_req *r, const ah_schedule *s)
{
	json_object *o = json_object_new_object();
	ah_json_str(o, "id", s->id);
	ah_json_str(o, "cron", s->cron);
	ah_json_str(o, "timezone", s->timezone);
	ah_json_str(o, "prompt", s->prompt);
	ah_json_str(o, "session_id", s->session_id);
	ah_json_str(o, "webhook_url", s->webhook_url);
	ah_json_bool(o, "paused", s->paused);
	ah_json_time(r, o, "next_run_at", s->next_run_at);
	json_object_object_add(o, "next_runs", next_runs_json(r, s));
	ah_json_time(r, o, "last_run_at", s->last_run_at);
	ah_json_str(o, "last_invocation_id", s->last_invocation_id);
	ah_json_str(o, "last_status", s->last_status);
	ah_json_str(o, "last_error", s->last_error);
	ah_json_int(o, "run_count", s->run_count);
	ah_json_time(r, o, "created_at", s->created_at);
	ah_json_time(r, o, "updated_at", s->updated_at);
	return o;
}

static json_object *schedule_row_json(ah_req *r, const ah_rows *rows, size_t i)
{
	return schedule_json(r, ah_schedule_from_row(r->arena, rows->v[i]));
}

/* 0 with *out, or 404 answered (AH_EDONE). */
static int load(ah_req *r, const ah_agent *a, const ah_schedule **out)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, SQL_GET, "ss", a->id, r->params[1]) != 0)
		return AH_EFAIL;
	if (rows.n != 1)
		return ah_reply_error(r, 404, "Schedule not found") == 0 ? AH_EDONE : AH_EFAIL;
	*out = ah_schedule_from_row(r->arena, rows.v[0]);
	return 0;
}

/* ---- input ---- */

/* Reads the fields present in o over *s (which holds the current values, or
 * the defaults of a new schedule); 422 entries for what is wrong. */
static void read_fields(ah_req *r, json_object *o, ah_schedule *s, bool create)
{
	unsigned req = create ? AH_F_REQUIRED : 0;
	size_t prompt_cap = (size_t)ah_settings_of(r->cfg)->invoke.max_prompt_bytes;
	if (prompt_cap > PROMPT_MAX)
		prompt_cap = PROMPT_MAX;
	char why[256];
	ah_cron c;
	const char *v;
	bool present, b;
	if (ah_field_str(r, o, "cron", req, 1, AH_CRON_EXPR_MAX, &v, &present) == 0 && present) {
		if (ah_cron_parse(&c, v, why, sizeof(why)) != 0)
			ah_verr(r, "body", "cron", ah_sprintf(r->arena, "Invalid cron expression: %s", why), "value_error");
		s->cron = v;
	}
	if (ah_field_str(r, o, "timezone", 0, 1, AH_CRON_ZONE_MAX, &v, &present) == 0 && present) {
		if (!ah_cron_zone_valid(v))
			ah_verr(r, "body", "timezone", "Unknown time zone: use an IANA name such as"
			        " Europe/Berlin or UTC", "value_error");
		s->timezone = v;
	}
	if (ah_field_str(r, o, "prompt", req, 0, prompt_cap, &v, &present) == 0 && present) {
		if (strlen(v) > prompt_cap) /* the invocation's cap counts bytes */
			ah_verr(r, "body", "prompt", ah_sprintf(r->arena, "String should have at most %zu bytes",
			        prompt_cap), "string_too_long");
		s->prompt = v;
	}
	if (ah_field_str(r, o, "session_id", AH_F_NULLABLE, 1, 128, &v, &present) == 0 && present) {
		if (v && !ah_session_id_valid(v))
			ah_verr(r, "body", "session_id", "String should match pattern '^[A-Za-z0-9._:-]{1,128}$'",
			        "string_pattern_mismatch");
		s->session_id = v;
	}
	/* The rules of a call's webhook_url (webhooks.h): each run passes it on. */
	ah_webhook_url_field(r, o, &v, &present);
	if (present)
		s->webhook_url = v;
	if (ah_field_bool(r, o, "paused", 0, &b, &present) == 0 && present)
		s->paused = b;
}

/* ---- handlers ---- */

static int list_schedules(ah_req *r)
{
	const ah_agent *a;
	int rc = ah_agent_load(r, &a);
	return rc ? rc : ah_list_reply(r, SQL_COUNT, SQL_LIST, a->id, schedule_row_json);
}

static int get_schedule(ah_req *r)
{
	const ah_agent *a;
	const ah_schedule *s;
	int rc = ah_agent_load(r, &a);
	if (rc != 0 || (rc = load(r, a, &s)) != 0)
		return rc;
	return ah_reply_json(r, 200, schedule_json(r, s));
}

static int reply_saved(ah_req *r, const ah_agent *a, const char *id, int status)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, SQL_GET, "ss", a->id, id) != 0 || rows.n != 1)
		return AH_EFAIL;
	return ah_reply_json(r, status, schedule_json(r, ah_schedule_from_row(r->arena, rows.v[0])));
}

static const char *const FIELDS[] = {"cron", "timezone", "prompt", "session_id", "webhook_url", "paused", NULL};

static int create_schedule(ah_req *r)
{
	const ah_agent *a;
	json_object *o;
	ah_schedule s = {.timezone = "UTC"};
	long long now, next = 0;
	int rc = ah_agent_load(r, &a);
	if (rc != 0 || (rc = ah_body_object(r, &o, FIELDS)) != 0)
		return rc;
	read_fields(r, o, &s, true);
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	if (ah_schedule_db_now(r->db, r->arena, &now) != 0)
		return AH_EFAIL;
	if (!s.paused)
		next = ah_schedule_next(s.cron, s.timezone, now);
	const char *id = ah_id_new(r->arena, "sch");
	if (ah_db_exec(r->db, NULL, SQL_INSERT, "sssssssiii", id, a->id, s.cron, s.timezone, s.prompt,
	               s.session_id, s.webhook_url, (long long)s.paused, next, next) != 0)
		return AH_EFAIL;
	return reply_saved(r, a, id, 201);
}

/* A new expression or zone, or a resume, starts from the first tick after
 * now; otherwise the tick in hand stays. */
static int update_schedule(ah_req *r)
{
	const ah_agent *a;
	const ah_schedule *old;
	json_object *o;
	long long now, next;
	int rc = ah_agent_load(r, &a);
	if (rc != 0 || (rc = load(r, a, &old)) != 0 || (rc = ah_body_object(r, &o, FIELDS)) != 0)
		return rc;
	ah_schedule s = *old;
	read_fields(r, o, &s, false);
	if (ah_verr_reply(r) != 0)
		return AH_EDONE;
	/* Otherwise next_run_at is left as it is in the row: a scheduler may
	 * have claimed the tick read above since. */
	bool retime = s.paused || strcmp(s.cron, old->cron) != 0 || strcmp(s.timezone, old->timezone) != 0 ||
	              (old->paused && !s.paused) || !old->next_run_at;
	next = 0;
	if (!s.paused && retime) {
		if (ah_schedule_db_now(r->db, r->arena, &now) != 0)
			return AH_EFAIL;
		next = ah_schedule_next(s.cron, s.timezone, now);
	}
	if (ah_db_exec(r->db, NULL, SQL_UPDATE, "sssssiiiiss", s.cron, s.timezone, s.prompt, s.session_id,
	               s.webhook_url, (long long)s.paused, (long long)retime, next, next, a->id, old->id) != 0)
		return AH_EFAIL;
	return reply_saved(r, a, old->id, 200);
}

static int delete_schedule(ah_req *r)
{
	const ah_agent *a;
	unsigned long long n = 0;
	int rc = ah_agent_load(r, &a);
	if (rc != 0)
		return rc;
	if (ah_db_exec(r->db, &n, SQL_DELETE, "ss", a->id, r->params[1]) != 0)
		return AH_EFAIL;
	return n ? ah_reply_no_content(r) : ah_reply_error(r, 404, "Schedule not found");
}

const ah_route ah_schedules_routes[] = {
	{"GET", "/agents/{slug}/schedules", list_schedules, 0, 0, AH_AGENT_SCOPE},
	{"POST", "/agents/{slug}/schedules", create_schedule, 0, 0, AH_AGENT_SCOPE},
	{"GET", "/agents/{slug}/schedules/{id}", get_schedule, 0, 0, AH_AGENT_SCOPE},
	{"PATCH", "/agents/{slug}/schedules/{id}", update_schedule, 0, 0, AH_AGENT_SCOPE},
	{"DELETE", "/agents/{slug}/schedules/{id}", delete_schedule, 0, 0, AH_AGENT_SCOPE},
	{NULL, NULL, NULL, 0, 0},
};
