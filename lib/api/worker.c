/* The worker's accept loop. SIGTERM is blocked while a request is handled and
 * unblocked only while waiting in accept, so a drain never cuts a response in
 * half: an idle worker exits at once, a busy one right after it answers. */
#include "api/worker.h"
#include "api/dispatch.h"
#include "core/log.h"
#include "db/db.h"
#include "ratelimit/ratelimit.h"

#include <errno.h>
#include <fcgiapp.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int ah_worker_listen(const ah_config *cfg, const char *path, ah_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		ah_err_set(err, AH_EINVALID, "socket path too long: %s", path);
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 1024) != 0) {
		ah_err_set(err, AH_EFAIL, "cannot listen on %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	const char *group = ah_config_get(cfg, "socket_group", "www-data");
	struct group *g = getgrnam(group);
	if (g && chown(path, (uid_t)-1, g->gr_gid) != 0)
		ah_log_warn("cannot chown %s to group %s: %s", path, group, strerror(errno));
	mode_t mode = (mode_t)strtol(ah_config_get(cfg, "socket_mode", "0660"), NULL, 8);
	chmod(path, mode & 0777);
	return fd;
}

static void on_term(int sig)
{
	(void)sig;
	_exit(0); /* only ever delivered while idle in accept: nothing to clean */
}

/* Ends the request. libfcgi closes a connection lingering: it shuts down its
 * side and waits (up to 2 s) for nginx to close first, which cost every request
 * an extra sleep and wake-up before the worker could accept the next. Once the
 * request's input is all read, nothing is left for nginx to send, and on a unix
 * socket it reads the whole response (ended by FCGI_END_REQUEST) before it sees
 * the close, so the linger buys nothing: detaching the request is libfcgi's way
 * to skip it. With input left unread (an early 401/413), linger as before so
 * that nginx can finish sending and still read the answer. */
static void finish(FCGX_Request *fcgi, const ah_req *r)
{
	bool drained = r->content_length <= 0 || FCGX_HasSeenEOF(fcgi->in) ||
	               (r->body && r->body_len == (size_t)r->content_length);
	if (!fcgi->keepConnection && drained)
		FCGX_Detach(fcgi);
	FCGX_Finish_r(fcgi);
	fcgi->detached = 0;
}

int ah_worker_run(const ah_config *cfg, int listen_fd, int pool)
{
	ah_err err = {0};
	ah_db *db = NULL;
	ah_log_set_program(pool ? "agenthost-api[invoke]" : "agenthost-api");
	if (ah_db_open(&db, cfg, &err) != 0) {
		ah_log_error("%s", err.msg);
		return 1;
	}
	if (ah_worker_init_pool(cfg, pool, &err) != 0) {
		ah_log_error("%s", err.msg);
		return 1;
	}
	FCGX_Init();
	FCGX_Request fcgi;
	FCGX_InitRequest(&fcgi, listen_fd, 0);
	ah_arena *arena = ah_arena_new();
	sigset_t term;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	struct sigaction sa = {.sa_handler = on_term};
	sigaction(SIGTERM, &sa, NULL);
	long long pruned = 0;
	for (;;) {
		sigprocmask(SIG_UNBLOCK, &term, NULL);
		int rc = FCGX_Accept_r(&fcgi);
		sigprocmask(SIG_BLOCK, &term, NULL);
		if (rc < 0)
			break;
		ah_req r = {.arena = arena, .fcgi = &fcgi, .db = db, .cfg = cfg};
		ah_dispatch(&r);
		finish(&fcgi, &r);
		ah_ratelimit_idle(db); /* the client has its answer: refill off its clock */
		ah_arena_reset(arena);
		/* Old rate-limit windows are dropped by whichever worker gets there;
		 * once a minute per worker is plenty (the statement scans the table). */
		long long now = (long long)time(NULL);
		if (now - pruned >= 60) {
			if (pruned)
				ah_ratelimit_prune(db);
			pruned = now;
		}
	}
	ah_arena_destroy(arena);
	ah_db_close(db);
	return 0;
}
