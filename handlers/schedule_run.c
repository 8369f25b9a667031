/* The scheduler (issue 32): a process the API's master keeps running beside
 * its workers (main.c hands it in as the app's background task), on every
 * API host whose `scheduler` setting is on.
 *
 * Why the API and not the runner: a scheduled run is an ordinary invocation,
 * and the one invoke path (admission, session cap, secrets and environment,
 * runner choice and takeover, accounting, the history row) is the API's
 * handler, handlers/invoke.c. The scheduler calls that handler, ah_invoke(),
 * with a request of its own making: the schedule's owner as the user, the
 * schedule's prompt and session as the body, the answer written to memory.
 * A runner would have had to grow a second invoke path.
 *
 * Claiming: every poll (schedule_poll_ms) reads the schedules due by the
 * database's clock, and for each moves next_run_at from the value it read to
 * the first tick after the database's now, in one conditional UPDATE. Only
 * one scheduler on the cluster sees its UPDATE change the row: that one runs
 * the tick. A tick long past (every API host was down) moves to the first
 * one after now, so the missed ticks run once, not once each.
 *
 * Running: each claimed tick runs in a child process of its own (a call may
 * take 600 s; the poll goes on), at most schedule_max_running at once per
 * host; a tick due while all are busy waits for the next poll. The child opens
 * its own database connection (the parent's is never used across fork).
 *
 * The same process sweeps the calls in progress whose owner is gone
 * (invocation_sweep.c) every running_sweep_ms, also where `scheduler` is
 * off. */
#include "invocations.h"
#include "schedules.h"
#include "auth/user.h"
#include "core/log.h"
#include "core/util.h"
#include "files_api.h"
#include "running.h"
#include "tokenize/tokenize.h"

#include <errno.h>
#include <fcgiapp.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DUE_BATCH 64
#define ANSWER_CAP (64 * 1024) /* of a run's answer kept to read its detail */

static const char SQL_DUE[] =
	"SELECT id, cron, timezone, next_run_at FROM schedules"
	" WHERE next_run_at <= NOW(3) AND paused = 0 ORDER BY next_run_at LIMIT ?";
/* last_run_at first: MariaDB assigns left to right, so it gets the tick's
 * time before next_run_at moves on. */
static const char SQL_CLAIM[] =
	"UPDATE schedules SET last_run_at = next_run_at,"
	" next_run_at = IF(? = 0, NULL, FROM_UNIXTIME(?)), run_count = run_count + 1,"
	" last_status = 'running', last_error = NULL, last_invocation_id = NULL"
	" WHERE id = ? AND next_run_at = ? AND paused = 0";
static const char SQL_LOAD[] =
	"SELECT s.prompt, s.session_id, s.webhook_url, a.slug, " AH_USER_COLS
	" FROM schedules s JOIN agents a ON a.id = s.agent_id JOIN users u ON u.id = a.user_id"
	" WHERE s.id = ?";
static const char SQL_DONE[] =
	"UPDATE schedules SET last_invocation_id = ?, last_status = ?, last_error = LEFT(?, 1024) WHERE id = ?";
static const char SQL_INV_ERROR[] = "SELECT error FROM invocations WHERE id = ?";

static volatile sig_atomic_t stopping;

static void on_term(int sig)
{
	(void)sig;
	stopping = 1;
}

/* ---- one run, in a child ---- */

/* Where the run's answer goes: memory, kept up to ANSWER_CAP. */
typedef struct answer {
	FCGX_Request fcgi;
	FCGX_Stream out;
	char *env[1];
	unsigned char buf[ANSWER_CAP];
} answer;

static void answer_full(FCGX_Stream *s, int doClose)
{
	(void)doClose;
	s->isClosed = 1; /* the rest is dropped: only the start is read */
}

static void answer_init(answer *an)
{
	memset(an, 0, sizeof(*an));
	an->out.rdNext = an->out.wrNext = an->out.stopUnget = an->buf;
	an->out.stop = an->buf + sizeof(an->buf) - 1;
	an->out.emptyBuffProc = answer_full;
	an->fcgi.out = &an->out;
	an->fcgi.envp = an->env;
}

/* Why a run did not succeed: a failed invocation's own error (its answer,
 * with up to 64 KiB of output, may not fit the buffer), else the answer's
 * "detail". */
static const char *run_error(ah_req *r, answer *an, const char *inv_id)
{
	ah_rows rows;
	if (inv_id && ah_db_query(r->db, r->arena, &rows, SQL_INV_ERROR, "s", inv_id) == 0 && rows.n == 1 &&
	    rows.v[0][0])
		return rows.v[0][0];
	*an->out.wrNext = '\0';
	char *body = strstr((char *)an->buf, "\r\n\r\n");
	json_object *o = body ? ah_json_own(r, json_tokener_parse(body + 4)) : NULL, *d;
	if (o && json_object_object_get_ex(o, "detail", &d) && json_object_is_type(d, json_type_string))
		return json_object_get_string(d);
	return ah_sprintf(r->arena, "HTTP %d", r->status);
}

/* A schedule's run has ended. status is "completed", "failed" (the
 * invocation inv_id was recorded) or "refused" (nothing ran: agent not
 * active, session limit, runner away; detail says why). A recorded run's
 * webhook was queued by the call itself (the body carries webhook_url); a
 * refused one is only logged. */
void ah_schedule_run_finished(ah_req *r, const char *schedule_id, const char *webhook_url,
                              const char *status, const char *inv_id, const char *detail);
void ah_schedule_run_finished(ah_req *r, const char *schedule_id, const char *webhook_url,
                              const char *status, const char *inv_id, const char *detail)
{
	(void)r;
	ah_log_info("schedule=%s run %s%s%s%s%s", schedule_id, status, inv_id ? " inv=" : "",
	            inv_id ? inv_id : "", detail ? ": " : "", detail ? detail : "");
	(void)webhook_url;
}

/* Runs the claimed tick of schedule id through the invoke handler. */
static void run_tick(ah_req *r, const char *id)
{
	ah_rows rows;
	answer *an = ah_alloc(r->arena, sizeof(*an));
	const char *inv_id = NULL;
	if (ah_db_query(r->db, r->arena, &rows, SQL_LOAD, "s", id) != 0 || rows.n != 1)
		return; /* deleted with its agent meanwhile */
	char **v = rows.v[0];
	json_object *body = ah_json_own(r, json_object_new_object());
	json_object_object_add(body, "prompt", json_object_new_string_len(v[0], (int)rows.len[0][0]));
	if (v[1])
		ah_json_str(body, "session_id", v[1]);
	if (v[2]) /* delivered by the call's own path (invoke.c, webhooks.c) */
		ah_json_str(body, "webhook_url", v[2]);
	size_t len;
	const char *text = ah_json_body(body, &len);
	answer_init(an);
	r->fcgi = &an->fcgi;
	r->method = "POST";
	r->path = ah_sprintf(r->arena, "/agents/%s/invoke", v[3]);
	r->query = "";
	r->request_id = ah_id_new(r->arena, "req");
	r->remote_addr = "scheduler";
	r->content_type = "application/json";
	r->body = ah_strdup(r->arena, text);
	r->body_len = len;
	r->content_length = (long long)len;
	r->params[0] = v[3];
	r->nparams = 1;
	r->user = ah_user_from_row(r->arena, v + 4);
	ah_log_set_request_id(r->request_id);
	int rc = r->user->disabled ? ah_reply_error(r, 403, "User account is disabled")
	                           : ah_invoke(r, id, &inv_id);
	if (!r->responded) {
		ah_log_error("schedule=%s: invoke failed (%d)", id, rc);
		ah_reply_error(r, 500, "Internal server error");
	}
	const char *status = inv_id ? (r->status == 200 ? "completed" : "failed") : "refused";
	const char *detail = r->status == 200 ? NULL : run_error(r, an, inv_id);
	if (ah_db_exec(r->db, NULL, SQL_DONE, "ssss", inv_id, status, detail, id) != 0)
		ah_log_error("schedule=%s: cannot record the run: %s", id, ah_db_error(r->db));
	ah_schedule_run_finished(r, id, v[2], status, inv_id, detail);
	ah_log_set_request_id(NULL);
}

static void run_child(const ah_config *cfg, const char *id)
{
	ah_err err = {0};
	ah_db *db = NULL;
	if (ah_db_open(&db, cfg, &err) != 0) {
		ah_log_error("schedule=%s: %s", id, err.msg);
		_exit(1);
	}
	ah_arena *arena = ah_arena_new();
	ah_req r = {.arena = arena, .db = db, .cfg = cfg};
	run_tick(&r, id);
	ah_arena_destroy(arena);
	ah_db_close(db);
	_exit(0);
}

/* ---- the poll ---- */

static int running;

static void reap(void)
{
	while (running > 0 && waitpid(-1, NULL, WNOHANG) > 0)
		running--;
}

/* Claims the tick of a row of SQL_DUE; true when this scheduler got it. */
static bool claim(ah_db *db, char *const *row, long long now)
{
	unsigned long long n = 0;
	long long next = ah_schedule_next(row[1], row[2], now);
	if (ah_db_exec(db, &n, SQL_CLAIM, "iiss", next, next, row[0], row[3]) != 0) {
		ah_log_error("schedule=%s: claim failed: %s", row[0], ah_db_error(db));
		return false;
	}
	return n == 1;
}

static void poll_once(const ah_config *cfg, ah_db *db, ah_arena *a)
{
	ah_rows rows;
	long long now, cap = ah_settings_of(cfg)->schedule.max_running;
	if (running >= cap)
		return;
	if (ah_db_query(db, a, &rows, SQL_DUE, "i", (long long)DUE_BATCH) != 0 ||
	    (rows.n && ah_schedule_db_now(db, a, &now) != 0))
		return;
	for (size_t i = 0; i < rows.n && running < cap && !stopping; i++) {
		if (!claim(db, rows.v[i], now))
			continue; /* another scheduler has this tick */
		pid_t pid = fork();
		if (pid == 0)
			run_child(cfg, rows.v[i][0]);
		if (pid < 0)
			ah_log_error("schedule=%s: fork failed: %s; this tick is lost", rows.v[i][0],
			             strerror(errno));
		else
			running++;
	}
}

/* The sweep of calls whose owner is gone (invocation_sweep.c), on its own
 * clock: every running_sweep_ms, on every API host, scheduler or not. */
static void sweep_due(ah_db *db, ah_arena *a, const ah_config *cfg, int64_t *next)
{
	int64_t now = ah_now_ms();
	if (now < *next)
		return;
	ah_req r = {.arena = a, .db = db, .cfg = cfg};
	ah_running_sweep(&r);
	*next = now + ah_settings_of(cfg)->schedule.sweep_ms;
}

int ah_scheduler_run(const ah_config *cfg)
{
	ah_err err = {0};
	ah_db *db = NULL;
	ah_log_set_program("agenthost-api[scheduler]");
	bool schedules = ah_settings_of(cfg)->schedule.enabled; /* else only the sweep */
	char msg[256];
	const char *vocab = ah_settings_of(cfg)->invoke.tokenizer_vocab;
	if (ah_db_open(&db, cfg, &err) != 0 || ah_files_init(cfg, &err) != 0 ||
	    ah_tokenize_init(*vocab ? vocab : NULL, msg, sizeof(msg)) != 0) {
		ah_log_error("%s", err.msg[0] ? err.msg : msg);
		return 1;
	}
	struct sigaction sa = {.sa_handler = on_term};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	ah_arena *arena = ah_arena_new();
	long long poll_ms = ah_settings_of(cfg)->schedule.poll_ms;
	int64_t next_sweep = 0;
	while (!stopping) {
		reap();
		if (schedules)
			poll_once(cfg, db, arena);
		sweep_due(db, arena, cfg, &next_sweep);
		ah_arena_reset(arena);
		long long ms = next_sweep - ah_now_ms();
		ms = ms < 0 ? 0 : schedules && ms > poll_ms ? poll_ms : ms;
		struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
		nanosleep(&ts, NULL);
	}
	while (running > 0 && waitpid(-1, NULL, 0) > 0) /* runs in hand finish */
		running--;
	ah_arena_destroy(arena);
	ah_db_close(db);
	return 0;
}
