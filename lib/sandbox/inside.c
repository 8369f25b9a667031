/* agenthost-keeper: the keeper, the spawner, the reaper and the agent (see
 * internal.h for who is who). The runner execs this program as the sandbox's
 * PID 1 with its two sockets at fds 3 and 4 (SB_KEEPER_CTL_FD/EXEC_FD).
 *
 * The reaper and the agent share memory with their parent until the agent
 * execs (CLONE_VM), so nothing here mallocs or uses stdio: system calls,
 * stack or static buffers and snprintf into arrays only. */
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

/* ---- helpers ---- */

static pid_t raw_fork(unsigned long flags)
{
	/* A null stack makes clone behave like fork, minus glibc's handlers. */
	return (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL);
}

static void reset_signals(void)
{
	sigset_t all;
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
}

static void die_with_parent(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1); /* the parent died before the line above */
}

/* GO's body: what the runner decided for this sandbox. */
static sb_keeper_conf K;

/* ---- agent ---- */

typedef struct exec_req {
	sb_msg m;
	char *argv[SB_EXEC_ARGS_MAX];
	char *envp[SB_EXEC_ARGS_MAX];
	int fds[3];
} exec_req;

static char body_buf[SB_MSG_MAX];

__attribute__((noreturn)) static void agent_main(exec_req *r)
{
	for (int i = 0; i < 3; i++)
		if (dup2(r->fds[i], i) < 0)
			_exit(126);
	syscall(SYS_close_range, 3, ~0U, 0);
	setsid();
	/* Every disposition here is the default already (the keeper reset them
	 * at its start, the spawner put SIGCHLD back); exec keeps the mask. */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	const char *what = "chdir";
	if (chdir(r->m.msg[0] ? r->m.msg : "/app") < 0)
		goto fail;
	what = "rlimits";
	if (sb_rlimits_apply(r->m.nofile, r->m.pids_max, r->m.fsize) < 0)
		goto fail;
	what = "drop privileges";
	if (sb_userns_drop_to_agent() < 0)
		goto fail;
	what = "seccomp";
	struct sock_fprog prog = { .len = K.seccomp_len, .filter = K.seccomp };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		goto fail;
	execve(r->argv[0], r->argv, r->envp);
	what = "exec";
fail:;
	char line[256];
	int n = snprintf(line, sizeof line, "sandbox: %s %s: %s\n", what,
	                 r->argv[0], strerror(errno));
	if (write(2, line, (size_t)n) < 0)
		_exit(127);
	_exit(127);
}

/* PID 1 of a fresh pid namespace per exec: when it exits the kernel kills
 * every process the agent left behind, so sessions never accumulate them. */
/* The agent shares the reaper's memory until it execs (as posix_spawn does,
 * on a stack of its own; the reaper is suspended meanwhile): no copy of the
 * address space made and torn down again per exec. Its descriptors,
 * credentials, signal handlers and limits are still its own. */
static char agent_stack[256 * 1024] __attribute__((aligned(64)));

static int agent_entry(void *arg)
{
	agent_main(arg);
}

__attribute__((noreturn)) static void reaper_main(exec_req *r, int status_fd)
{
	/* status_fd is closed by agent_main's close_range. */
	pid_t agent = clone(agent_entry, agent_stack + sizeof agent_stack,
	                    CLONE_VM | CLONE_VFORK | SIGCHLD, r);
	if (agent < 0)
		_exit(125);
	/* After the clone: the agent starts with the default disposition. */
	sb_reaper_wait(agent, status_fd, r->fds, 3);
}

/* The reaper shares the spawner's memory as well (it only makes system calls,
 * on a stack of its own): forking it used to copy the page tables of what was
 * a copy of the runner and tear them down again at its exit, on every exec.
 * Its descriptors are still its own (no CLONE_FILES), and the spawner leaves
 * the exec request alone until it has reaped the reaper. */
static char reaper_stack[64 * 1024] __attribute__((aligned(64)));

typedef struct reaper_arg {
	exec_req *r;
	int exec_fd, status_fd, status_rd;
} reaper_arg;

static int reaper_entry(void *arg)
{
	reaper_arg *a = arg;
	close(a->exec_fd);
	close(a->status_rd);
	reaper_main(a->r, a->status_fd);
}

/* Waits for the agent's status from the reaper while honouring KILL from the
 * runner; returns it (a killed reaper reads as SIGKILL, *killed set). */
static int supervise(int exec_fd, pid_t reaper, int status_fd, bool *killed)
{
	int st = SIGKILL, got = 0;
	struct pollfd pf[2] = { { exec_fd, POLLIN, 0 }, { status_fd, POLLIN, 0 } };
	while (!got) {
		if (poll(pf, 2, -1) < 0)
			continue;
		if (pf[1].revents) {
			*killed = read(status_fd, &st, sizeof st) != sizeof st;
			if (*killed)
				st = SIGKILL;
			got = 1;
		}
		if (pf[0].revents && sb_forward_kill(exec_fd, reaper) <= 0)
			pf[0].fd = -1;
	}
	return st;
}

static void reap(pid_t reaper)
{
	while (waitpid(reaper, NULL, 0) < 0 && errno == EINTR)
		;
}

/* Answers the run's status and reaps its reaper. A run that ended on its
 * own is answered first, as the reaper's exit tears its pid namespace down
 * (whatever the agent left behind dies with it), which the caller need not
 * wait for. A killed one is answered only once that is done: its status pipe
 * reads empty when the dying reaper closes its files, before the kernel
 * kills the namespace, and the runner closes the program's stdin at the
 * answer. In that gap a program still alive read an end of input it never
 * had: a session's waiting process, cancelled unused, ran on an empty
 * prompt in the session's sandbox (seen once in a full test run). The next
 * request is read only after this. */
static void finish_run(int exec_fd, pid_t reaper, int status_fd, bool premade)
{
	bool killed = false;
	sb_msg m = { .op = SB_EXITED, .arg = supervise(exec_fd, reaper, status_fd, &killed),
	             .argc = premade };
	if (killed)
		reap(reaper);
	sb_send(exec_fd, &m, NULL, 0, NULL, 0);
	if (!killed)
		reap(reaper);
}

/* The pre-made pair (premade.c), and how many in a row did not take their
 * request: past a few the spawner stops making them (a cause that lasts,
 * such as a working directory only root may enter, would make every exec
 * pay for both paths). */
static sb_pre pre = { .reaper = -1, .rq = -1, .status = -1 };
static int pre_refused;
#define PRE_REFUSED_MAX 3

static void make_premade(int exec_fd)
{
	static struct sock_fprog prog;
	prog = (struct sock_fprog){ .len = K.seccomp_len, .filter = K.seccomp };
	if (pre.reaper <= 0 && pre_refused < PRE_REFUSED_MAX)
		sb_pre_make(&pre, exec_fd, &prog);
}

/* Runs r on the pre-made process when one is ready and takes it. */
static bool run_premade(int exec_fd, exec_req *r, size_t blen)
{
	if (pre.reaper <= 0)
		return false;
	if (!sb_pre_hand_over(&pre, exec_fd, &r->m, body_buf, blen, r->fds)) {
		pre_refused++;
		return false;
	}
	pre_refused = 0;
	for (int i = 0; i < 3; i++) {
		close(r->fds[i]); /* the agent has its own */
		r->fds[i] = -1;
	}
	finish_run(exec_fd, pre.reaper, pre.status, true);
	close(pre.status);
	pre.reaper = pre.status = -1;
	return true;
}

static void run_one(int exec_fd, exec_req *r, size_t blen)
{
	int sp[2] = { -1, -1 };
	if (sb_exec_parse(&r->m, body_buf, blen, r->argv, r->envp) < 0) {
		sb_error_reply(exec_fd, EINVAL, "bad exec request");
		goto done;
	}
	if (run_premade(exec_fd, r, blen))
		goto done;
	if (pipe2(sp, O_CLOEXEC) < 0) {
		sb_error_reply(exec_fd, errno, "pipe");
		goto done;
	}
	reaper_arg ra = { r, exec_fd, sp[1], sp[0] };
	SB_STACK_FRESH(reaper_stack);
	SB_STACK_FRESH(agent_stack);
	pid_t reaper = clone(reaper_entry, reaper_stack + sizeof reaper_stack,
	                     CLONE_VM | CLONE_NEWPID | SIGCHLD, &ra);
	if (reaper < 0) {
		sb_error_reply(exec_fd, errno, "clone pid namespace");
		goto done;
	}
	close(sp[1]);
	sp[1] = -1;
	for (int i = 0; i < 3; i++)
		close(r->fds[i]); /* ours only; the reaper still reads the numbers */
	finish_run(exec_fd, reaper, sp[0], false);
	for (int i = 0; i < 3; i++)
		r->fds[i] = -1; /* after the run: the reaper reads them */
done:
	for (int i = 0; i < 2; i++)
		if (sp[i] >= 0)
			close(sp[i]);
	for (int i = 0; i < 3; i++)
		if (r->fds[i] >= 0)
			close(r->fds[i]);
}

/* ---- spawner ---- */

__attribute__((noreturn)) static void spawner_main(int exec_fd, int sync_fd, pid_t keeper)
{
	static exec_req r;
	char b = 0;
	die_with_parent(keeper);
	signal(SIGCHLD, SIG_DFL);
	/* The sandbox's programs are the OOM killer's first choice, on the
	 * host and in the cgroup (the keeper is its last). Written while still
	 * root of the host, which also makes 1000 the floor: the agents, which
	 * inherit it, cannot lower it again (as they could the keeper's -1000). */
	sb_write_file("/proc/self/oom_score_adj", "1000");
	/* The keeper writes our maps, then we become root inside = uid_base. */
	if (unshare(CLONE_NEWUSER) < 0 || write(sync_fd, "u", 1) != 1 ||
	    read(sync_fd, &b, 1) != 1 || b != 'm' || sb_userns_become_root() < 0 ||
	    write(sync_fd, "r", 1) != 1)
		_exit(1);
	close(sync_fd);
	/* A spare sandbox's first exec finds its process ready; so does a
	 * session's next, made after each exec that is not the sandbox's last. */
	make_premade(exec_fd);
	for (;;) {
		size_t blen = 0;
		int nfds = 0;
		memset(r.fds, -1, sizeof r.fds);
		int rc = sb_recv(exec_fd, &r.m, body_buf, sizeof body_buf, &blen, r.fds, &nfds);
		if (rc == 0)
			_exit(0); /* the runner closed the sandbox */
		if (rc > 0 && r.m.op == SB_KILL && nfds == 0)
			continue; /* for a program that had ended already (a race, see exec.c) */
		if (rc < 0 || r.m.op != SB_EXEC || nfds != 3) {
			for (int i = 0; i < nfds; i++)
				close(r.fds[i]);
			sb_error_reply(exec_fd, EPROTO, "bad request");
			continue;
		}
		run_one(exec_fd, &r, blen);
		if (!(r.m.arg & SB_EXEC_LAST))
			make_premade(exec_fd);
	}
}

/* ---- keeper ---- */

static int start_spawner(const sb_plan *p, int exec_fd, const char **what)
{
	int sv[2];
	char b = 0;
	*what = "start spawner";
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	pid_t self = getpid();
	pid_t pid = raw_fork(0);
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(sv[0]);
		close(SB_KEEPER_CTL_FD); /* the runner's control socket is the keeper's alone */
		spawner_main(exec_fd, sv[1], self);
	}
	close(sv[1]);
	close(exec_fd);
	*what = "spawner user namespace";
	if (read(sv[0], &b, 1) != 1 || b != 'u')
		return -1;
	*what = "uid/gid maps";
	if (sb_userns_write_maps(pid, p->uid_base) < 0 || write(sv[0], "m", 1) != 1)
		return -1;
	*what = "spawner credentials";
	if (read(sv[0], &b, 1) != 1 || b != 'r')
		return -1;
	close(sv[0]);
	return 0;
}

static int join_cgroups(void)
{
	for (int i = 0; i < 3; i++)
		if (K.cg_join[i][0] && sb_write_file(K.cg_join[i], "0") < 0)
			return -1;
	return 0;
}

static int keeper_setup(const sb_plan *p, int exec_fd, const char **what)
{
	/* Never the OOM killer's choice: the agent is. Best effort: some hosts
	 * refuse negative values even to root. */
	sb_write_file("/proc/self/oom_score_adj", "-1000");
	*what = "cgroup attach";
	if (join_cgroups() < 0)
		return -1;
	*what = "cgroup namespace";
	if (unshare(CLONE_NEWCGROUP) < 0)
		return -1;
	*what = "hostname";
	if (sethostname("sandbox", 7) < 0)
		return -1;
	if (sb_mounts_build_root(p, K.resolv, what) < 0)
		return -1;
	if (start_spawner(p, exec_fd, what) < 0)
		return -1;
	/* Orphans re-parented to PID 1 are reaped by the kernel. */
	signal(SIGCHLD, SIG_IGN);
	return 0;
}

/* One request of the runner: the image at /app, a bind (a bucket), or the
 * pinned names of an allow-list (egress.c). */
static int serve_one(const sb_msg *m, int fd, const char *body, size_t blen, const char **what)
{
	if (m->op == SB_ETC_NET)
		return sb_mounts_etc_net(body, blen, what);
	if (m->op == SB_MOUNT_APP)
		return sb_mounts_app(fd, what);
	char path[SB_BIND_PATH_MAX];
	*what = "bad bind path";
	if (sb_bind_path(body, blen, path) < 0)
		return -1;
	return sb_mounts_bind(fd, path, what);
}

__attribute__((noreturn)) static void keeper_serve(int ctl)
{
	for (;;) {
		sb_msg m;
		static char body[SB_ETC_NET_MAX];
		size_t blen = 0;
		int fds[3] = { -1, -1, -1 }, nfds = 0;
		int rc = sb_recv(ctl, &m, body, sizeof body, &blen, fds, &nfds);
		if (rc == 0)
			_exit(0);
		bool mount_op = m.op == SB_MOUNT_APP || m.op == SB_MOUNT_BIND;
		if (rc < 0 || (!mount_op && m.op != SB_ETC_NET) || nfds != (mount_op ? 1 : 0)) {
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			sb_error_reply(ctl, EPROTO, "bad request");
			continue;
		}
		const char *what = "";
		if (serve_one(&m, fds[0], body, blen, &what) < 0)
			sb_error_reply(ctl, errno, what);
		else
			sb_send(ctl, &(sb_msg){ .op = SB_OK }, NULL, 0, NULL, 0);
		if (fds[0] >= 0)
			close(fds[0]);
	}
}

/* GO carries the settings; anything else first (or a runner gone: EOF)
 * ends the keeper before it has set anything up. */
static bool receive_go(int ctl)
{
	sb_msg m;
	size_t blen = 0;
	if (sb_recv(ctl, &m, &K, sizeof K, &blen, NULL, NULL) != 1 || m.op != SB_GO ||
	    blen != sizeof K || K.seccomp_len == 0 || K.seccomp_len > SB_SECCOMP_MAX)
		return false;
	K.resolv[sizeof K.resolv - 1] = '\0';
	for (int i = 0; i < 3; i++)
		K.cg_join[i][sizeof K.cg_join[i] - 1] = '\0';
	K.plan.root_mnt[sizeof K.plan.root_mnt - 1] = '\0';
	K.plan.loop_dev[sizeof K.plan.loop_dev - 1] = '\0';
	return true;
}

int main(void)
{
	int ctl = SB_KEEPER_CTL_FD, exec_fd = SB_KEEPER_EXEC_FD;
	reset_signals();
	/* The runner's thread that started us may exit with the runner: then so
	 * do we (a runner dying before this line closes ctl: see receive_go). */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (fcntl(ctl, F_GETFD) < 0 || fcntl(exec_fd, F_GETFD) < 0)
		return 2; /* not started by the runner */
	syscall(SYS_close_range, SB_KEEPER_EXEC_FD + 1, ~0U, 0);
	if (!receive_go(ctl))
		_exit(1);
	const char *what = "";
	if (keeper_setup(&K.plan, exec_fd, &what) < 0) {
		sb_error_reply(ctl, errno, what);
		_exit(1);
	}
	if (sb_send(ctl, &(sb_msg){ .op = SB_READY }, NULL, 0, NULL, 0) < 0)
		_exit(1);
	keeper_serve(ctl);
}
