/* The spawner's pre-made agent (issue 31: nothing on the call path that a
 * spare sandbox could have done before). The spawner keeps one pair ready: a
 * reaper, PID 1 of a fresh pid namespace as for any exec, and its child, which
 * has already done all that does not depend on the request: setsid, an empty
 * signal mask, the drop to the agent user, no_new_privs and the seccomp filter
 * (loading it alone costs ~0.4 ms). The child then blocks reading its request
 * from a socket pair only the spawner holds the other end of; on it, it applies
 * what the request says (chdir, rlimits), tells the spawner it goes ahead,
 * takes the three stdio descriptors and execs. The cold path (inside.c) stays
 * as it was and runs whenever no pair is ready or the pair could not take the
 * request: a call never fails because of the pre-made process.
 *
 * Security. The waiting child has no more privilege than the agent it becomes:
 * it is already the agent user, without capabilities, no_new_privs, filtered.
 * It holds no descriptor but stdio and its end of the request channel (closed
 * before anything else runs in it), so the runner's socket never reaches it.
 * It runs nothing but this file's code until its exec. No agent process exists
 * while it waits: the spawner makes a pair only after the exec before has
 * ended and its pid namespace is gone (reaped), and hands the pair the next
 * request. Were one to run beside it, it would sit in a sibling pid namespace:
 * no agent can name, signal or ptrace it, nor reach its channel, whose other
 * end is the spawner's alone (close-on-exec there). The request it reads is
 * the one the spawner read from the runner; the channel is closed before the
 * exec. Kills work as before: the spawner signals the reaper, whose end tears
 * its namespace down; a SIGTERM reaches the agent's process group. Teardown:
 * the keeper's end kills every namespace below it; the spawner's end closes
 * the channel, and the waiting child exits on its EOF.
 *
 * One difference from the cold path, handled by falling back to it: the cold
 * agent changes directory and sets its rlimits while still root of the
 * sandbox's user namespace, the pre-made one as the agent user. Lowering
 * rlimits needs no privilege and raising them needs CAP_SYS_RESOURCE in the
 * host's namespace, which neither has, so limits come out the same; a working
 * directory the agent user cannot enter makes the child refuse the request
 * ('F'), and the spawner runs it cold. Runs inside: no malloc, no stdio. */
#include "sandbox/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/seccomp.h>

/* ---- the run's reaper and its kill (cold and pre-made) ---- */

/* The agent's pid for the reaper's SIGTERM handler: a cancel (issue 28)
 * reaches the agent's process group, which may end cleanly. */
static volatile pid_t term_target;

static void pass_term(int sig)
{
	(void)sig;
	if (term_target > 0)
		kill(-term_target, SIGTERM);
}

void sb_reaper_wait(pid_t agent, int status_fd, const int *fds, int nfds)
{
	/* As its namespace's init, the reaper gets only signals it handles:
	 * the handler is in place before the fds, and with them the agent's
	 * pipes, are let go. */
	term_target = agent;
	struct sigaction sa = {.sa_handler = pass_term};
	sigaction(SIGTERM, &sa, NULL);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	int st;
	for (;;) {
		pid_t w = waitpid(-1, &st, 0);
		if (w == agent)
			break;
		if (w < 0 && errno != EINTR)
			_exit(124);
	}
	if (write(status_fd, &st, sizeof st) < 0)
		_exit(123);
	_exit(0);
}

int sb_forward_kill(int exec_fd, pid_t reaper)
{
	sb_msg m;
	int rc = sb_recv(exec_fd, &m, NULL, 0, NULL, NULL, NULL);
	/* A cancel's SIGTERM: the reaper passes it to the agent. */
	bool term = rc > 0 && m.op == SB_KILL && m.arg == SIGTERM;
	kill(reaper, term ? SIGTERM : SIGKILL); /* KILL, EOF (runner gone) or garbage */
	return rc;
}

/* ---- the waiting child ---- */

static char rq_body[SB_MSG_MAX];
static char *rq_argv[SB_EXEC_ARGS_MAX], *rq_envp[SB_EXEC_ARGS_MAX];

static void say(int rq, char c)
{
	if (send(rq, &c, 1, MSG_NOSIGNAL) < 0)
		_exit(1);
}

__attribute__((noreturn)) static void child_main(int rq, const struct sock_fprog *filter)
{
	/* Nothing of the spawner's but the channel (the runner's socket, the
	 * reaper's status pipe): stdio stays until the request's replaces it. */
	if (rq > 3)
		syscall(SYS_close_range, 3, (unsigned)rq - 1, 0);
	syscall(SYS_close_range, (unsigned)rq + 1, ~0U, 0);
	setsid();
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (sb_userns_drop_to_agent() < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, filter) < 0)
		_exit(1); /* the spawner finds the channel closed: it runs the call cold */
	sb_msg m;
	size_t blen = 0;
	int fds[3] = { -1, -1, -1 }, nfds = 0;
	int rc = sb_recv(rq, &m, rq_body, sizeof rq_body, &blen, fds, &nfds);
	if (rc == 0)
		_exit(0); /* the spawner is gone, or let this pair go */
	bool ok = rc > 0 && m.op == SB_EXEC && nfds == 3 &&
	          sb_exec_parse(&m, rq_body, blen, rq_argv, rq_envp) == 0 &&
	          chdir(m.msg[0] ? m.msg : "/app") == 0 &&
	          sb_rlimits_apply(m.nofile, m.pids_max, m.fsize) == 0;
	say(rq, ok ? 'G' : 'F');
	if (!ok)
		_exit(1); /* the spawner runs the request cold */
	for (int i = 0; i < 3; i++)
		if (dup2(fds[i], i) < 0)
			_exit(126);
	syscall(SYS_close_range, 3, ~0U, 0); /* the channel too: the agent never has it */
	execve(rq_argv[0], rq_argv, rq_envp);
	char line[256];
	int n = snprintf(line, sizeof line, "sandbox: exec %s: %s\n", rq_argv[0], strerror(errno));
	if (write(2, line, (size_t)n) < 0)
		_exit(127);
	_exit(127);
}

/* ---- spawner side ---- */

/* The reaper and the child share the spawner's memory, as the cold path's do
 * (a fork's copy of the address space, made and torn down again per exec,
 * cost more than all the rest here), but neither is suspended meanwhile: each
 * runs on a stack of its own and touches only its own buffers below and
 * above (rq_body, rq_argv, rq_envp; the reaper's term_target), never the
 * spawner's request. The child's exec gives it a memory of its own. This
 * pair's arguments stay put until it is reaped: the next pair is made after. */
static struct reaper_arg {
	int exec_fd, rq0, rq1, st0, st1;
	const struct sock_fprog *filter;
} RA;

static char reaper_stack[64 * 1024] __attribute__((aligned(64)));
static char child_stack[64 * 1024] __attribute__((aligned(64)));

static int child_entry(void *arg)
{
	const struct reaper_arg *a = arg;
	child_main(a->rq1, a->filter);
}

static int reaper_entry(void *arg)
{
	const struct reaper_arg *a = arg;
	close(a->exec_fd);
	close(a->rq0);
	close(a->st0);
	pid_t child = clone(child_entry, child_stack + sizeof child_stack, CLONE_VM | SIGCHLD, arg);
	if (child < 0)
		_exit(125);
	sb_reaper_wait(child, a->st1, &a->rq1, 1);
}

static void pre_clear(sb_pre *p)
{
	p->reaper = -1;
	p->rq = p->status = -1;
}

int sb_pre_make(sb_pre *p, int exec_fd, const struct sock_fprog *filter)
{
	int rq[2], st[2];
	pre_clear(p);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rq) < 0)
		return -1;
	if (sb_fit_send_buffer(rq[0]) < 0 || pipe2(st, O_CLOEXEC) < 0) {
		close(rq[0]);
		close(rq[1]);
		return -1;
	}
	RA = (struct reaper_arg){ exec_fd, rq[0], rq[1], st[0], st[1], filter };
	SB_STACK_FRESH(reaper_stack);
	SB_STACK_FRESH(child_stack);
	pid_t reaper = clone(reaper_entry, reaper_stack + sizeof reaper_stack,
	                     CLONE_VM | CLONE_NEWPID | SIGCHLD, &RA);
	close(rq[1]);
	close(st[1]);
	if (reaper < 0) {
		close(rq[0]);
		close(st[0]);
		return -1;
	}
	p->reaper = reaper;
	p->rq = rq[0];
	p->status = st[0];
	return 0;
}

void sb_pre_discard(sb_pre *p)
{
	if (p->reaper <= 0)
		return;
	kill(p->reaper, SIGKILL);
	while (waitpid(p->reaper, NULL, 0) < 0 && errno == EINTR)
		;
	close(p->rq);
	close(p->status);
	pre_clear(p);
}

/* The child's answer: 'G' (it execs), 'F' or the channel's end (it did not
 * take the request). A kill from the runner meanwhile counts as taken: its
 * status is the run's, as a cold agent killed at its start would give. */
static bool wait_taken(sb_pre *p, int exec_fd)
{
	bool killed = false;
	struct pollfd pf[2] = { { p->rq, POLLIN, 0 }, { exec_fd, POLLIN, 0 } };
	for (;;) {
		if (poll(pf, 2, -1) < 0)
			continue;
		if (pf[1].revents) { /* a KILL (or the runner's end) meanwhile */
			sb_forward_kill(exec_fd, p->reaper);
			killed = true;
			pf[1].fd = -1;
		}
		if (pf[0].revents) {
			char c = 0;
			ssize_t n = recv(p->rq, &c, 1, MSG_DONTWAIT);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			return killed || (n == 1 && c == 'G');
		}
	}
}

int sb_pre_hand_over(sb_pre *p, int exec_fd, const sb_msg *m, const char *body, size_t blen,
                     const int fds[3])
{
	/* A child that died waiting (its channel readable: at its end) takes nothing. */
	struct pollfd pf = { p->rq, POLLIN, 0 };
	if (poll(&pf, 1, 0) != 0 || sb_send(p->rq, m, body, blen, fds, 3) < 0 ||
	    !wait_taken(p, exec_fd)) {
		sb_pre_discard(p);
		return 0;
	}
	close(p->rq); /* the reaper and its status pipe are now the run's */
	p->rq = -1;
	return 1;
}
