/* Exec, runner side: one program run in a claimed sandbox.
 *
 * The runner makes the three pipes, fills stdin (all of it, up front, when the
 * pipe can be grown to hold it), and hands the sandbox ends to the spawner with
 * argv/envp in one message. It then polls stdout (capped), stderr (logged line
 * by line under the log tag, escaped and capped; last 4 KiB kept), the rest
 * of stdin, the spawner's socket (exit status) and the deadline. Timeout or
 * output over the cap: the spawner kills the program's pid namespace, i.e.
 * the whole tree, which no signal handling inside can resist. SIGPIPE is
 * blocked in this thread while writing stdin, so a program that exits without
 * reading cannot kill the runner. */
#include "sandbox/sandbox.h"
#include "sandbox/internal.h"
#include "sandbox/exec_io.h"

#include "core/log.h"
#include "core/redact.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


long long sb_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- whether programs run now (for background work: see sandbox.h) ---- */

static pthread_mutex_t run_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t run_cv = PTHREAD_COND_INITIALIZER; /* running fell to 0 */
static int running;
static long long run_changed_ms;

static void run_mark(int delta)
{
	pthread_mutex_lock(&run_mu);
	running += delta;
	run_changed_ms = sb_mono_ms();
	if (running == 0)
		pthread_cond_broadcast(&run_cv);
	pthread_mutex_unlock(&run_mu);
}

/* run_mu held. */
static long long quiet_in_ms(void)
{
	long long left = run_changed_ms + SB_QUIET_SETTLE_MS - sb_mono_ms();
	return running ? SB_QUIET_SETTLE_MS : left > 0 ? left : 0;
}

long long sb_exec_quiet_in_ms(void)
{
	pthread_mutex_lock(&run_mu);
	long long ms = quiet_in_ms();
	pthread_mutex_unlock(&run_mu);
	return ms;
}

void ah_sandbox_wait_quiet(void)
{
	long long give_up = sb_mono_ms() + SB_QUIET_MAX_MS, wait, left;
	pthread_mutex_lock(&run_mu);
	while ((wait = quiet_in_ms()) > 0 && (left = give_up - sb_mono_ms()) > 0) {
		struct timespec ts = ah_deadline_in_ms(wait < left ? wait : left);
		pthread_cond_timedwait(&run_cv, &run_mu, &ts);
	}
	pthread_mutex_unlock(&run_mu);
}

/* ---- one run ---- */

static int pack(const ah_sandbox_exec_spec *x, char **body, size_t *blen, int *argc, int *envc)
{
	size_t n = 0;
	*argc = *envc = 0;
	for (const char *const *a = x->argv; *a; a++, (*argc)++)
		n += strlen(*a) + 1;
	for (const char *const *e = x->envp; e && *e; e++, (*envc)++)
		n += strlen(*e) + 1;
	if (n > SB_MSG_MAX || *argc >= SB_EXEC_ARGS_MAX || *envc >= SB_EXEC_ARGS_MAX)
		return -1;
	char *b = malloc(n ? n : 1), *p = b;
	if (!b)
		return -1;
	for (const char *const *a = x->argv; *a; a++)
		p = (char *)memcpy(p, *a, strlen(*a) + 1) + strlen(*a) + 1;
	for (const char *const *e = x->envp; e && *e; e++)
		p = (char *)memcpy(p, *e, strlen(*e) + 1) + strlen(*e) + 1;
	*body = b;
	*blen = n;
	return 0;
}

static int send_kill(ah_sandbox *sb)
{
	return sb_send(sb->exec_fd, &(sb_msg){ .op = SB_KILL }, NULL, 0, NULL, 0);
}

/* A cancel's first step: SIGTERM to the program (inside.c), which may end
 * cleanly; io_loop sends the KILL after the grace period. */
static int send_term(ah_sandbox *sb)
{
	return sb_send(sb->exec_fd, &(sb_msg){ .op = SB_KILL, .arg = SIGTERM }, NULL, 0, NULL, 0);
}

/* A cancel asked for: SIGTERM now, *kill_now once the grace is over. */
static int cancel_step(ah_sandbox *sb, io *s, long long now, long long *term_at, bool *kill_now)
{
	if (!s->cancel || !*s->cancel)
		return 0;
	if (*term_at < 0) {
		*term_at = now;
		s->cancelled = true;
		return send_term(sb) < 0 ? -1 : 0;
	}
	if (now >= *term_at + AH_SANDBOX_CANCEL_GRACE_MS)
		*kill_now = true;
	return 0;
}

/* One answer from the spawner: 1 exited (status set, and *premade), or an
 * error code. */
static int on_spawner(ah_sandbox *sb, int *status, bool *premade, ah_err *err)
{
	sb_msg m;
	int rc = sb_recv(sb->exec_fd, &m, NULL, 0, NULL, NULL, NULL);
	if (rc != 1)
		return ah_err_set(err, AH_EFAIL, "sandbox %s: spawner died", sb->plan.id);
	if (m.op == SB_ERROR) {
		m.msg[sizeof m.msg - 1] = '\0';
		return ah_err_set(err, AH_EFAIL, "sandbox %s: %s", sb->plan.id, m.msg);
	}
	if (m.op != SB_EXITED)
		return ah_err_set(err, AH_EFAIL, "sandbox %s: unexpected message", sb->plan.id);
	*status = m.arg;
	if (premade)
		*premade = m.argc == 1;
	return 1;
}

static int wait_ms(long long now, long long until)
{
	long long d = until - now;
	return d < 0 ? 0 : d > 60000 ? 60000 : (int)d;
}

/* Runs until the program has exited and both output pipes are at EOF. */
static int io_loop(ah_sandbox *sb, io *s, int timeout_ms, int *status, bool *timed_out,
                   bool *premade, ah_err *err)
{
	long long now = sb_mono_ms(), kill_at = -1, exited_at = -1, term_at = -1;
	long long deadline = timeout_ms > 0 ? now + timeout_ms : -1;
	while (exited_at < 0 || s->fd_out >= 0 || s->fd_err >= 0) {
		bool kill_now = false;
		struct pollfd pf[4] = { { exited_at < 0 ? sb->exec_fd : -1, POLLIN, 0 },
		                        { s->fd_out, POLLIN, 0 }, { s->fd_err, POLLIN, 0 },
		                        { s->fd_in, POLLOUT, 0 } };
		long long until = exited_at >= 0 ? exited_at + 2000
		                : kill_at >= 0 ? kill_at + KILL_GRACE_MS
		                : deadline >= 0 ? deadline : now + 60000;
		if (s->cancel && exited_at < 0 && kill_at < 0 && until > now + 200)
			until = now + 200; /* a cancel is seen within this */
		int r = poll(pf, 4, wait_ms(now, until));
		if (r < 0 && errno != EINTR)
			return ah_err_set(err, AH_EFAIL, "poll: %s", strerror(errno));
		now = sb_mono_ms();
		if (r > 0) {
			if (pf[3].revents)
				sb_io_feed_stdin(s);
			if (pf[1].revents)
				sb_io_drain(s, &s->fd_out, true, &kill_now);
			if (pf[2].revents)
				sb_io_drain(s, &s->fd_err, false, &kill_now);
			if (pf[0].revents) {
				int rc = on_spawner(sb, status, premade, err);
				if (rc < 0)
					return rc;
				exited_at = now;
			}
		}
		if (exited_at >= 0 && now >= exited_at + 2000)
			break; /* every process is dead: a pipe still open is ours to drop */
		if (exited_at < 0 && kill_at >= 0 && now >= kill_at + KILL_GRACE_MS)
			return ah_err_set(err, AH_EFAIL, "sandbox %s did not stop the program", sb->plan.id);
		if (exited_at < 0 && deadline >= 0 && now >= deadline && kill_at < 0)
			kill_now = *timed_out = true;
		if (exited_at < 0 && kill_at < 0 && cancel_step(sb, s, now, &term_at, &kill_now) < 0)
			return ah_err_set(err, AH_EFAIL, "sandbox %s: spawner died", sb->plan.id);
		if (kill_now && kill_at < 0 && exited_at < 0) {
			if (send_kill(sb) < 0)
				return ah_err_set(err, AH_EFAIL, "sandbox %s: spawner died", sb->plan.id);
			kill_at = now;
		}
	}
	return 0;
}

static int open_pipes(int p[3][2], io *s)
{
	for (int i = 0; i < 3; i++)
		p[i][0] = p[i][1] = -1;
	for (int i = 0; i < 3; i++)
		if (pipe2(p[i], O_CLOEXEC) < 0)
			return -1;
	/* The runner's ends now belong to s. */
	s->fd_in = p[0][1];
	s->fd_out = p[1][0];
	s->fd_err = p[2][0];
	p[0][1] = p[1][0] = p[2][0] = -1;
	if (fcntl(s->fd_in, F_SETFL, O_NONBLOCK) != 0 || fcntl(s->fd_out, F_SETFL, O_NONBLOCK) != 0 ||
	    fcntl(s->fd_err, F_SETFL, O_NONBLOCK) != 0)
		return -1;
	/* A prompt that fits in the pipe is written before the program starts;
	 * a pipe that cannot grow (pipe-max-size) is only fed as the program reads. */
	if (s->in_len > 65536 && s->in_len <= 1 << 20 &&
	    fcntl(s->fd_in, F_SETPIPE_SZ, (int)s->in_len) < 0)
		ah_log_warn("cannot grow the stdin pipe to %zu bytes: %s", s->in_len, strerror(errno));
	return 0;
}

static void to_stderr(void *ctx, const char *b, size_t n)
{
	sb_io_on_stderr(ctx, b, n);
}

/* The redacted window of stderr the caller keeps (an invocation's logs). */
static void keep_err_log(ah_sandbox_result *out, io *s)
{
	size_t len = 0;
	const char *k = s->rd ? ah_redact_kept(s->rd, &len, &out->err_log_truncated) : NULL;
	if (!k || !(out->err_log = malloc(len + 1)))
		return;
	memcpy(out->err_log, k, len);
	out->err_log[len] = '\0';
	out->err_log_len = len;
}

static void fill_result(ah_sandbox_result *out, io *s, int status)
{
	if (WIFSIGNALED(status)) {
		out->exit_code = -1;
		out->signal = WTERMSIG(status);
	} else {
		out->exit_code = WEXITSTATUS(status);
	}
	if (s->rd)
		ah_redact_end(s->rd); /* what it held back, into the log too */
	if (s->line_len)
		sb_io_log_line(s);
	keep_err_log(out, s);
	out->output_truncated = s->truncated;
	if (s->out_file >= 0)
		s->out_len = 0; /* out stays empty: the output is in the file */
	if (!s->out)
		s->out = calloc(1, 1);
	if (s->out)
		s->out[s->out_len] = '\0';
	out->out = s->out;
	out->out_len = s->out ? s->out_len : 0;
	s->out = NULL;
	if (s->tail_len && (out->err_tail = malloc(s->tail_len + 1))) {
		memcpy(out->err_tail, s->tail, s->tail_len);
		out->err_tail[s->tail_len] = '\0';
	}
}

static int start(ah_sandbox *sb, const ah_sandbox_exec_spec *x, int p[3][2], ah_err *err)
{
	char *body = NULL;
	size_t blen = 0;
	sb_msg m = { .op = SB_EXEC, .arg = x->last ? SB_EXEC_LAST : 0, .nofile = sb->plan.nofile,
	             .pids_max = sb->plan.pids_max, .fsize = sb->plan.disk_bytes };
	if (pack(x, &body, &blen, &m.argc, &m.envc) < 0)
		return ah_err_set(err, AH_ETOOBIG, "argv/envp too large");
	if (x->cwd && strlen(x->cwd) >= sizeof m.msg) {
		free(body);
		return ah_err_set(err, AH_EINVALID, "cwd too long");
	}
	if (x->cwd)
		memcpy(m.msg, x->cwd, strlen(x->cwd) + 1);
	int fds[3] = { p[0][0], p[1][1], p[2][1] };
	int rc = sb_send(sb->exec_fd, &m, body, blen, fds, 3), e = errno;
	free(body);
	for (int i = 0; i < 3; i++) {
		close(fds[i]);
		p[i][i == 0 ? 0 : 1] = -1;
	}
	if (rc < 0 && e == EMSGSIZE) /* a host whose net.core.wmem_max is below 132 KiB */
		return ah_err_set(err, AH_ETOOBIG, "argv/envp too large for the exec socket");
	return rc < 0 ? ah_err_set(err, AH_EFAIL, "sandbox %s: spawner died", sb->plan.id) : 0;
}

/* Holds its pipes until the rest of the run (exec_common) or a cancel. */
int sb_exec_begin(ah_sandbox *sb, const ah_sandbox_exec_spec *x, ah_err *err)
{
	if (!x->argv || !x->argv[0] || x->argv[0][0] != '/')
		return ah_err_set(err, AH_EINVALID, "argv[0] must be an absolute path");
	if (sb->held.on)
		return ah_err_set(err, AH_EINVALID, "sandbox %s already holds a program", sb->plan.id);
	io s = { .fd_in = -1, .fd_out = -1, .fd_err = -1, .out_file = -1 };
	int p[3][2], rc = 0;
	long long oom_before = sb->oom_kills >= 0 ? sb->oom_kills : sb_cgroup_oom_count(sb);
	if (open_pipes(p, &s) < 0)
		rc = ah_err_set(err, AH_EFAIL, "pipe: %s", strerror(errno));
	else
		rc = start(sb, x, p, err);
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 2; j++)
			if (p[i][j] >= 0)
				close(p[i][j]);
	if (rc != 0) {
		sb_io_close_fd(&s.fd_in);
		sb_io_close_fd(&s.fd_out);
		sb_io_close_fd(&s.fd_err);
		return rc;
	}
	sb->held.fd_in = s.fd_in;
	sb->held.fd_out = s.fd_out;
	sb->held.fd_err = s.fd_err;
	sb->held.oom_before = oom_before;
	sb->held.rd = x->nredact ? ah_redact_new(x->redact, x->nredact, 0, NULL, NULL) : NULL;
	sb->held.on = true;
	return 0;
}

/* The spawner's socket has something to say (the program's end, or the
 * spawner's) while a held program should be waiting. */
bool sb_exec_held_alive(const ah_sandbox *sb)
{
	struct pollfd pf = { sb->exec_fd, POLLIN, 0 };
	return sb->held.on && poll(&pf, 1, 0) == 0;
}

void sb_exec_held_close(ah_sandbox *sb)
{
	if (!sb->held.on)
		return;
	sb_io_close_fd(&sb->held.fd_in);
	sb_io_close_fd(&sb->held.fd_out);
	sb_io_close_fd(&sb->held.fd_err);
	ah_redact_free(sb->held.rd);
	sb->held.rd = NULL;
	sb->held.on = false;
}

/* What a held program wrote to stderr, into the log (why it died, usually). */
static void log_held_stderr(ah_sandbox *sb, const char *tag)
{
	io s = { .tag = tag, .fd_err = sb->held.fd_err, .out_file = -1, .rd = sb->held.rd };
	bool unused = false;
	if (s.rd)
		ah_redact_set_sink(s.rd, to_stderr, &s);
	for (int i = 0; i < 16 && s.fd_err >= 0; i++) {
		struct pollfd pf = { s.fd_err, POLLIN, 0 };
		if (poll(&pf, 1, 0) <= 0)
			break;
		sb_io_drain(&s, &s.fd_err, false, &unused);
	}
	if (s.rd)
		ah_redact_end(s.rd);
	if (s.line_len)
		sb_io_log_line(&s);
	sb->held.fd_err = s.fd_err;
}

/* An idle spawner ignores a KILL (inside.c), so one sent as the program
 * ended on its own does no harm. */
int sb_exec_cancel(ah_sandbox *sb, const char *tag)
{
	if (!sb->held.on)
		return 0;
	int status = 0, rc = send_kill(sb) < 0 ? -1 : 0;
	long long until = sb_mono_ms() + KILL_GRACE_MS;
	while (rc == 0) {
		struct pollfd pf = { sb->exec_fd, POLLIN, 0 };
		int n = poll(&pf, 1, wait_ms(sb_mono_ms(), until));
		if (n == 0 || (n < 0 && errno != EINTR)) {
			rc = -1;
			break;
		}
		ah_err err = {0};
		if (n > 0 && on_spawner(sb, &status, NULL, &err) != 1)
			rc = -1;
		else if (n > 0)
			break;
	}
	log_held_stderr(sb, tag);
	sb_exec_held_close(sb);
	if (rc == 0)
		sb->oom_kills = sb_cgroup_oom_count(sb);
	return rc;
}

/* A whole run (held false), or the rest of one begun by sb_exec_begin. */
static int exec_common(ah_sandbox *sb, const ah_sandbox_exec_spec *x, ah_sandbox_result *out,
                       bool held, ah_err *err)
{
	if (!x->argv || !x->argv[0] || x->argv[0][0] != '/')
		return ah_err_set(err, AH_EINVALID, "argv[0] must be an absolute path");
	io s = { .in = x->stdin_data, .in_len = x->stdin_data || x->stdin_from_fd ? x->stdin_len : 0,
	         .in_is_file = x->stdin_from_fd, .in_file = x->stdin_fd,
	         .max_out = x->max_output ? x->max_output : 10 << 20, .tag = x->log_tag,
	         .fd_in = -1, .fd_out = -1, .fd_err = -1,
	         .out_file = x->stdout_to_fd ? x->stdout_fd : -1,
	         .on_output = x->on_output, .output_ctx = x->output_ctx,
	         .on_stdout = x->on_stdout, .stdout_ctx = x->stdout_ctx, .cancel = x->cancel };
	int p[3][2], status = 0, rc = 0;
	for (int i = 0; i < 3; i++)
		p[i][0] = p[i][1] = -1;
	sigset_t pipe_set, old;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	/* Nothing runs in the sandbox between execs (each one's processes die
	 * with its pid namespace): the count after the last one is the count now. */
	long long oom_before = held ? sb->held.oom_before
	                     : sb->oom_kills >= 0 ? sb->oom_kills : sb_cgroup_oom_count(sb);
	long long t0 = sb_mono_ms(), u0 = ah_mono_us(), u1 = 0;
	/* Out of memory: stderr is logged as before, none is kept. */
	if (x->nredact || x->keep_stderr)
		s.rd = ah_redact_new(x->redact, x->nredact, x->keep_stderr, to_stderr, &s);
	run_mark(1);
	if (held) {
		/* What the program wrote before its prompt came waits in the pipes
		 * and is read first: it is part of this run's output. */
		s.fd_in = sb->held.fd_in;
		s.fd_out = sb->held.fd_out;
		s.fd_err = sb->held.fd_err;
		ah_redact_free(sb->held.rd); /* the call's own values redact from here */
		sb->held.rd = NULL;
		sb->held.on = false;
		sb_io_feed_stdin(&s);
	} else if (open_pipes(p, &s) < 0) {
		rc = ah_err_set(err, AH_EFAIL, "pipe: %s", strerror(errno));
		goto done;
	} else {
		sb_io_feed_stdin(&s);
		rc = start(sb, x, p, err);
	}
	u1 = ah_mono_us();
	if (rc == 0)
		rc = io_loop(sb, &s, x->timeout_ms, &status, &out->timed_out, &out->premade, err);
	if (rc == 0) {
		fill_result(out, &s, status);
		out->cancelled = s.cancelled;
		out->start_us = u1 - u0;
		out->run_us = ah_mono_us() - u1;
		sb->oom_kills = sb_cgroup_oom_count(sb);
		out->oom_killed = sb->oom_kills > oom_before;
		out->duration_ms = sb_mono_ms() - t0;
	}
done:
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 2; j++)
			if (p[i][j] >= 0)
				close(p[i][j]);
	sb_io_close_fd(&s.fd_in);
	sb_io_close_fd(&s.fd_out);
	sb_io_close_fd(&s.fd_err);
	free(s.out);
	ah_redact_free(s.rd);
	run_mark(-1);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int sb_exec_run(ah_sandbox *sb, const ah_sandbox_exec_spec *x, ah_sandbox_result *out, ah_err *err)
{
	return exec_common(sb, x, out, false, err);
}

int sb_exec_finish(ah_sandbox *sb, const ah_sandbox_exec_spec *x, ah_sandbox_result *out,
                   ah_err *err)
{
	if (!sb->held.on)
		return ah_err_set(err, AH_EINVALID, "sandbox %s holds no program", sb->plan.id);
	return exec_common(sb, x, out, true, err);
}
