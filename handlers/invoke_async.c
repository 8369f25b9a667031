/* Asynchronous invocations (issue 28): "async": true is answered 202 with
 * {invocation_id, status: "running"} at once, and the call runs in a process
 * of its own — a grandchild of the worker, so the worker (one of
 * invoke_workers) goes back to serving at once and reaps only the child that
 * exits at once. That process runs and records the call exactly as the worker
 * would (ah_call_run: one recording path) on a database connection of its
 * own, and lives until the runner has answered and the call is recorded.
 *
 * While it runs, the call has a row in invocations_running (GET shows it as
 * running, cancel finds its runner), and its owner holds the lock
 * agenthost_inv_<id> on its own connection, taken before it makes the row.
 * A row with nobody holding the lock (the owner was killed: an API host
 * restarted or died) is recorded failed with that reason by the API
 * master's periodic sweep or the first GET (invocation_sweep.c). A runner
 * that dies mid-call is the owner's to see: its answer never comes, and the
 * call is recorded failed like a plain one ("sandbox runner unavailable").
 * A streamed call has the row too (ah_running_begin/end), so it can be
 * looked up and cancelled while it streams. */
#include "invoke.h"
#include "running.h"
#include "core/log.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <fcgiapp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define STARTED_WAIT_MS 10000 /* the owner has its connection and lock by then */

static const char SQL_RUNNING_ADD[] =
	"INSERT INTO invocations_running (id, agent_id, session_id, runner_id, prompt, input_tokens,"
	" created_at, webhook_url) VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
static const char SQL_RUNNING_DEL[] = "DELETE FROM invocations_running WHERE id = ?";

static int lock(ah_req *r, const char *id)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, AH_RUNNING_SQL_LOCK, "s", id) != 0 || rows.n != 1 ||
	    !rows.v[0][0] || strcmp(rows.v[0][0], "1") != 0)
		return AH_EFAIL;
	return 0;
}

static int running_add(ah_req *r, const ah_call *c)
{
	/* The webhook as ah_call_run resolves it: for the record of a lost call. */
	const char *hook = c->in.webhook_url ? c->in.webhook_url : c->a->webhook_url;
	return ah_db_exec(r->db, NULL, SQL_RUNNING_ADD, "ssssbiss", c->inv.id, c->a->id, c->inv.session_id,
	                  c->a->runner_id, c->inv.prompt, c->inv.prompt_len, (long long)c->in_tokens,
	                  c->inv.created_at, hook);
}

void ah_running_end(ah_req *r, const ah_call *c)
{
	ah_rows rows;
	if (ah_db_exec(r->db, NULL, SQL_RUNNING_DEL, "s", c->inv.id) != 0 ||
	    ah_db_query(r->db, r->arena, &rows, AH_RUNNING_SQL_UNLOCK, "s", c->inv.id) != 0)
		ah_log_warn("inv=%s: its running row not removed: %s", c->inv.id, ah_db_error(r->db));
}

/* The lock first: a row is never seen without its owner's lock but when
 * the owner is gone (invocation_sweep.c). */
int ah_running_begin(ah_req *r, const ah_call *c)
{
	ah_rows rows;
	if (lock(r, c->inv.id) != 0)
		return AH_EFAIL;
	if (running_add(r, c) == 0)
		return 0;
	ah_db_query(r->db, r->arena, &rows, AH_RUNNING_SQL_UNLOCK, "s", c->inv.id);
	return AH_EFAIL;
}

/* Nothing ran (the runner was busy or away): the call is still recorded, so
 * its GET ends, as failed, with nothing charged. */
static void record_not_run(ah_req *r, ah_call *c)
{
	c->inv.status = AH_INV_FAILED;
	c->inv.error = c->o.detail;
	c->inv.duration_ms = ah_now_ms() - c->start;
	c->inv.cost = "0";
	ah_invocation_record(r, c->a->id, &c->inv, NULL, 0);
}

/* The owner: a connection and the lock of its own, then the call. */
__attribute__((noreturn)) static void owner(ah_req *r, ah_call *c, int ready_fd)
{
	ah_db *db = NULL;
	ah_err err = {0};
	setsid(); /* a signal to the worker's group is not for the call */
	signal(SIGTERM, SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
	/* The worker's connections are the worker's: the FastCGI ones closed,
	 * its database connection left alone (closing it would end its session). */
	if (r->fcgi->ipcFd >= 0)
		close(r->fcgi->ipcFd);
	if (r->fcgi->listen_sock >= 0)
		close(r->fcgi->listen_sock);
	r->fcgi = NULL;
	ah_log_set_program("agenthost-api[async]");
	if (ah_db_open(&db, r->cfg, &err) != 0) {
		ah_log_error("inv=%s: no database connection for the call: %s", c->inv.id, err.msg);
		_exit(1);
	}
	r->db = db;
	if (ah_running_begin(r, c) != 0 || write(ready_fd, "k", 1) != 1)
		_exit(1);
	close(ready_fd);
	ah_call_run(r, c);
	if (c->o.http == 503)
		record_not_run(r, c);
	ah_running_end(r, c);
	ah_db_close(db);
	_exit(0);
}

/* Forks the owner (through a child that exits at once, so nobody waits on
 * it) and waits until it holds the call's lock and has made its row. */
static int start_owner(ah_req *r, ah_call *c)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		return AH_EFAIL;
	pid_t child = fork();
	if (child == 0) {
		close(p[0]);
		if (fork() == 0)
			owner(r, c, p[1]);
		_exit(0);
	}
	close(p[1]);
	if (child > 0)
		while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
			;
	char b = 0;
	struct pollfd pf = {.fd = p[0], .events = POLLIN};
	bool ok = child > 0 && poll(&pf, 1, STARTED_WAIT_MS) == 1 && read(p[0], &b, 1) == 1 && b == 'k';
	close(p[0]);
	return ok ? 0 : AH_EFAIL;
}

int ah_invoke_async(ah_req *r, ah_call *c)
{
	if (start_owner(r, c) != 0) {
		ah_log_error("inv=%s: the process for the asynchronous call did not start", c->inv.id);
		return ah_reply_error(r, 503, "The asynchronous call could not be started; try again");
	}
	json_object *o = json_object_new_object();
	ah_json_str(o, "invocation_id", c->inv.id);
	ah_json_str(o, "session_id", c->inv.session_id);
	ah_json_str(o, "status", "running");
	ah_json_time(r, o, "created_at", c->inv.created_at);
	ah_header(r, "Location", ah_sprintf(r->arena, "/api/v1/agents/%s/invocations/%s", c->a->slug,
	                                    c->inv.id));
	return ah_reply_json(r, 202, o);
}
