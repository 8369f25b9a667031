/* The worker's loop: wait for a request on one of the connections nginx keeps
 * to this worker or on a new one, answer it, keep the connection if nginx
 * does. SIGTERM is blocked except while waiting (epoll_pwait unblocks it for its
 * wait alone: no two sigprocmask calls a request), so a drain never cuts a
 * response in half: an idle worker exits at once, a busy one right after it
 * answers. */
#include "api/worker.h"
#include "api/dispatch.h"
#include "core/log.h"
#include "db/db.h"
#include "ratelimit/ratelimit.h"

#include <errno.h>
#include <fcntl.h>
#include <fcgiapp.h>
#include <grp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
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
	const char *group = ah_settings_of(cfg)->api.socket_group;
	struct group *g = getgrnam(group);
	if (g && chown(path, (uid_t)-1, g->gr_gid) != 0)
		ah_log_warn("cannot chown %s to group %s: %s", path, group, strerror(errno));
	long long mode = ah_settings_of(cfg)->api.socket_mode; /* checked at load */
	if (chmod(path, (mode_t)mode) != 0)
		ah_err_set(err, AH_EFAIL, "cannot chmod %s: %s", path, strerror(errno));
	/* Workers poll it with their kept connections; whoever loses the race
	 * for a new connection gets EAGAIN instead of blocking. */
	else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)
		ah_err_set(err, AH_EFAIL, "cannot make %s non-blocking: %s", path, strerror(errno));
	else
		return fd;
	close(fd);
	return -1;
}

static void on_term(int sig)
{
	(void)sig;
	ah_log_flush();
	_exit(0); /* only ever delivered while waiting for a request: nothing to clean */
}

/* A worker that crashes still writes the log lines it held (ah_log_hold),
 * then dies of the signal as it would have (or meets the handler that was
 * there before, a sanitizer's). */
static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NCRASH (sizeof crash_signals / sizeof *crash_signals)
static struct sigaction crash_prev[NCRASH];

static void on_crash(int sig)
{
	ah_log_flush();
	for (size_t i = 0; i < NCRASH; i++)
		if (crash_signals[i] == sig)
			sigaction(sig, &crash_prev[i], NULL);
	raise(sig); /* blocked until this returns, then the previous action's */
}

static void hold_log_lines(void)
{
	struct sigaction sa = {.sa_handler = on_crash};
	for (size_t i = 0; i < NCRASH; i++)
		sigaction(crash_signals[i], &sa, &crash_prev[i]);
	ah_log_hold(true);
}

/* Ends the request. libfcgi closes a connection lingering: it shuts down its
 * side and waits (up to 2 s) for nginx to close first, which cost every request
 * an extra sleep and wake-up before the worker could accept the next. Once the
 * request's input is all read, nothing is left for nginx to send, and on a unix
 * socket it reads the whole response (ended by FCGI_END_REQUEST) before it sees
 * the close, so the linger buys nothing: detaching the request is libfcgi's way
 * to skip it. With input left unread (an early 401/413), linger as before so
 * that nginx can finish sending and still read the answer.
 *
 * A connection nginx keeps (fastcgi_keep_conn) must carry nothing of this
 * request into the next: input the handler left unread is read and dropped.
 * Returns the connection to keep, or -1. */
static int finish(FCGX_Request *fcgi, const ah_req *r)
{
	bool drained = r->content_length <= 0 || FCGX_HasSeenEOF(fcgi->in) ||
	               (r->body && r->body_len == (size_t)r->content_length);
	if (fcgi->keepConnection && !drained) {
		char scrap[16384];
		while (FCGX_GetStr(scrap, sizeof(scrap), fcgi->in) > 0)
			;
	}
	if (!fcgi->keepConnection && drained)
		FCGX_Detach(fcgi);
	FCGX_Finish_r(fcgi);
	fcgi->detached = 0;
	int kept = fcgi->ipcFd; /* -1 unless nginx keeps it and it is sound */
	fcgi->ipcFd = -1;
	return kept;
}

/* Connections nginx keeps open to this worker between requests (its upstream
 * keepalive) wait in one epoll set with the listening socket. A worker serves
 * one request at a time: a request nginx sends on a kept connection while it
 * is busy waits for the request in hand (nginx reuses the connection it got
 * back last, usually one whose worker is free). Idle, a worker always takes
 * new connections too: one refused would wait in the backlog until nginx
 * happened to close some other.
 *
 * epoll rather than ppoll over the kept connections: ppoll registered on and
 * left every connection's wait queue on every wait, and with the ten or so a
 * worker holds under load that was a fifth of its CPU a request (issue 31,
 * perf: fdget, sock_poll and the wait queues' locks). The set changes only
 * when a connection comes or goes. The listening socket is in it with
 * EPOLLEXCLUSIVE, so a new connection wakes one idle worker instead of every
 * one of them (each a context switch there and back and a failed accept4:
 * issue 31 measured 15 of the 16 invoke workers woken for nothing on every
 * call); a busy worker's set is passed over. */
#define MAX_KEPT 64

typedef struct waiter {
	int ep, listen_fd, nkept;
	struct epoll_event ev[MAX_KEPT + 1];
	int nready, next; /* the last wait's events not taken yet, in its order */
} waiter;

static int waiter_init(waiter *w, int listen_fd)
{
	*w = (waiter){.listen_fd = listen_fd};
	w->ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.fd = listen_fd};
	if (w->ep < 0 || epoll_ctl(w->ep, EPOLL_CTL_ADD, listen_fd, &ev) != 0)
		return -1;
	return 0;
}

/* After a request on connection fd (kept: fd if nginx keeps it, else -1, as
 * libfcgi closed it): a connection nginx keeps joins the set unless it is in
 * it already; one closed has left it by closing. */
static void keep(waiter *w, int fd, bool in_set, int kept)
{
	if (in_set) {
		w->nkept -= kept < 0;
		return;
	}
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = fd};
	if (kept < 0)
		return;
	if (w->nkept >= MAX_KEPT || epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
		close(fd); /* more than nginx keeps in all: a stale one */
		return;
	}
	w->nkept++;
}

/* The next ready event: one left from the last wait, else a new wait. The log
 * lines of the requests answered meanwhile go out before the worker sleeps;
 * while requests are waiting, the lines wait with them and go out later in
 * one write (a system call less a request). 0 when interrupted. */
static int next_event(waiter *w, const sigset_t *waiting, struct epoll_event *out)
{
	if (w->next >= w->nready) {
		int n = 0;
		if (ah_log_holding()) {
			n = epoll_pwait(w->ep, w->ev, MAX_KEPT + 1, 0, waiting);
			if (n == 0)
				ah_log_flush();
		}
		if (n == 0)
			n = epoll_pwait(w->ep, w->ev, MAX_KEPT + 1, -1, waiting);
		w->nready = n > 0 ? n : 0;
		w->next = 0;
		if (n <= 0)
			return 0;
	}
	*out = w->ev[w->next++];
	return 1;
}

/* A new connection, or -1 when another worker took it first; -2 when
 * accepting fails for good. */
static int accept_new(int listen_fd)
{
	int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
		return -2;
	return fd;
}

/* The next connection with a request on it, *was_kept saying whether it is
 * in the set: a kept one or a new one. -1 when there is none after all:
 * another worker took the new connection, or nginx closed a kept one; -2 when
 * accepting fails for good (out of descriptors, say): the worker exits, and
 * the master starts a new one, as when libfcgi's own accept failed. */
static int next_connection(waiter *w, const sigset_t *waiting, bool *was_kept)
{
	struct epoll_event ev;
	*was_kept = false;
	if (!next_event(w, waiting, &ev))
		return -1;
	if (ev.data.fd == w->listen_fd)
		return accept_new(w->listen_fd);
	int fd = ev.data.fd;
	/* Readable and not hung up: a request (a syscall saved on every request).
	 * nginx closes a kept connection only while it is idle; should bytes
	 * come with the hang-up all the same, they are served. */
	char b;
	if ((ev.events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) && recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) <= 0) {
		close(fd); /* nginx let it go (or it broke); closing takes it out of the set */
		w->nkept--;
		return -1;
	}
	*was_kept = true;
	return fd;
}

int ah_worker_run(const ah_config *cfg, int listen_fd, int pool, const ah_api_app *app)
{
	ah_err err = {0};
	ah_db *db = NULL;
	ah_log_set_program(pool == AH_POOL_INVOKE    ? "agenthost-api[invoke]"
	                   : pool == AH_POOL_METRICS ? "agenthost-api[metrics]"
	                                             : "agenthost-api");
	if (pool != AH_POOL_METRICS && ah_db_open(&db, cfg, &err) != 0) {
		ah_log_error("%s", err.msg);
		return 1;
	}
	if (app->init_pool && app->init_pool(cfg, pool, &err) != 0) {
		ah_log_error("%s", err.msg);
		return 1;
	}
	/* Short requests, many a second: their lines are held. An invocation's
	 * take seconds, and a scrape writes none. */
	if (pool == AH_POOL_CRUD)
		hold_log_lines();
	FCGX_Init();
	FCGX_Request fcgi;
	FCGX_InitRequest(&fcgi, -1, 0); /* connections come from next_connection */
	ah_arena *arena = ah_arena_new();
	sigset_t term, waiting;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	struct sigaction sa = {.sa_handler = on_term};
	sigaction(SIGTERM, &sa, NULL);
	sigprocmask(SIG_BLOCK, &term, &waiting);
	sigdelset(&waiting, SIGTERM);
	long long pruned = 0;
	waiter w;
	if (waiter_init(&w, listen_fd) != 0) {
		ah_log_error("epoll for the worker's connections: %s", strerror(errno));
		return 1;
	}
	for (;;) {
		bool was_kept;
		int fd = next_connection(&w, &waiting, &was_kept);
		if (fd == -2) {
			ah_log_error("accept failed: %s", strerror(errno));
			break;
		}
		if (fd < 0)
			continue;
		/* libfcgi reads the request from the connection handed to it (and
		 * keepConnection stops it from closing that one first). If it finds
		 * none there, it closes it and would accept one itself: its request
		 * has no listening socket (-EBADF then), as every connection must
		 * come through the set. */
		fcgi.ipcFd = fd;
		fcgi.keepConnection = 1;
		int rc = FCGX_Accept_r(&fcgi);
		if (rc == -EBADF || rc == -EINTR) {
			keep(&w, fd, was_kept, -1); /* closed: no request came on it */
			continue;
		}
		if (rc < 0)
			break;
		ah_req r = {.arena = arena, .fcgi = &fcgi, .db = db, .cfg = cfg};
		if (pool == AH_POOL_METRICS)
			ah_dispatch_metrics(&r, app->routes);
		else
			ah_dispatch(&r, app->routes);
		keep(&w, fd, was_kept, finish(&fcgi, &r));
		ah_ratelimit_idle(db); /* the client has its answer: refill off its clock */
		ah_arena_reset(arena);
		/* Old rate-limit windows are dropped by whichever worker gets there;
		 * once a minute per worker is plenty (the statement scans the table). */
		long long now = (long long)time(NULL);
		if (now - pruned >= 60) {
			if (pruned && db)
				ah_ratelimit_prune(db);
			pruned = now;
		}
	}
	ah_log_flush();
	ah_arena_destroy(arena);
	ah_db_close(db);
	return 0;
}
