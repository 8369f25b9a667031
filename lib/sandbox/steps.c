/* Building and tearing down a sandbox: the plan, and one flat ordered list of
 * host-side steps, each with its set-up and tear-down (as nsjail and
 * bubblewrap do it). The pool (pool.c) builds sandboxes ahead of calls with
 * sb_build; the steps inside the sandbox (cgroup namespace, network, root
 * filesystem, user namespace) are the keeper's: see inside.c. */
#include "sandbox/sandbox.h"
#include "sandbox/internal.h"

#include "core/log.h"
#include "core/util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/close_range.h>
#include <linux/mount.h>

/* ---- keeper process ---- */

/* The child of keeper_spawn, on a stack of its own in the runner's memory
 * while the runner's thread waits (CLONE_VM | CLONE_VFORK, as posix_spawn
 * does): it only joins the slot's network namespace, puts its two sockets at
 * 3 and 4 and execs agenthost-keeper. Its descriptor table is its own copy;
 * signals are blocked until the exec. Not instrumented by ASan: it would
 * poison redzones on that stack, which is an array in keeper_spawn's frame,
 * and the exec never unpoisons them, so the runner's next deeper frame there
 * would trip over them. */
typedef struct keeper_child {
	int ctl, ex, netns;
} keeper_child;

__attribute__((no_sanitize_address))
static int keeper_child_main(void *arg)
{
	keeper_child *c = arg;
	if (setns(c->netns, CLONE_NEWNET) < 0)
		_exit(125);
	/* Out of the way first: any of the three may be 3 or 4 now. */
	int ctl = fcntl(c->ctl, F_DUPFD_CLOEXEC, 100), ex = fcntl(c->ex, F_DUPFD_CLOEXEC, 100);
	int exe = fcntl(sb_g.keeper_exe, F_DUPFD_CLOEXEC, 100);
	if (ctl < 0 || ex < 0 || exe < 0 || dup2(ctl, SB_KEEPER_CTL_FD) < 0 ||
	    dup2(ex, SB_KEEPER_EXEC_FD) < 0)
		_exit(126);
	/* Close on exec, not now: the program's own descriptor is among them. */
	syscall(SYS_close_range, SB_KEEPER_EXEC_FD + 1, ~0U, CLOSE_RANGE_CLOEXEC);
	char *argv[] = { "agenthost-keeper", NULL }, *envp[] = { NULL };
	syscall(SYS_execveat, exe, "", argv, envp, AT_EMPTY_PATH);
	_exit(127);
}

static int keeper_spawn(ah_sandbox *sb, ah_err *err)
{
	int ctl[2], ex[2] = { -1, -1 };
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0)
		return ah_err_set(err, AH_EFAIL, "socketpair: %s", strerror(errno));
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ex) < 0 ||
	    sb_fit_send_buffer(ex[0]) < 0) {
		int e = errno;
		close(ctl[0]);
		close(ctl[1]);
		if (ex[0] >= 0) /* socketpair leaves ex alone when it fails */
			close(ex[0]), close(ex[1]);
		return ah_err_set(err, AH_EFAIL, "exec socket: %s", strerror(e));
	}
	keeper_child child = { ctl[1], ex[1], sb_slot_of(sb)->netns };
	char stack[32 * 1024] __attribute__((aligned(16)));
	int pidfd = -1;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t pid = clone(keeper_child_main, stack + sizeof stack,
	                  CLONE_VM | CLONE_VFORK | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
	                  CLONE_NEWUTS | CLONE_PIDFD | SIGCHLD,
	                  &child, &pidfd);
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	close(ctl[1]);
	close(ex[1]);
	sb->ctl_fd = ctl[0];
	sb->exec_fd = ex[0];
	if (pid < 0)
		return ah_err_set(err, AH_EFAIL, "clone namespaces: %s", strerror(e));
	sb->keeper = pid;
	sb->keeper_pidfd = pidfd;
	/* A refill runs as SCHED_IDLE (pool.c); the agents, which descend from
	 * the keeper, must not. The keeper forks nothing before GO. */
	sched_setscheduler(pid, SCHED_OTHER, &(struct sched_param){ 0 });
	setpriority(PRIO_PROCESS, (id_t)pid, 0);
	return 0;
}

/* SIGKILL to the pid namespace's init kills every process in it; once it is
 * reaped the mount namespace is gone, and with it the overlay, the disk and
 * (AUTOCLEAR) the loop device. Waits on the pidfd, then reaps: the runner may
 * reap children itself, so ECHILD is fine. */
static void keeper_kill(ah_sandbox *sb)
{
	if (sb->keeper_pidfd >= 0) {
		syscall(SYS_pidfd_send_signal, sb->keeper_pidfd, SIGKILL, NULL, 0);
		struct pollfd pf = { sb->keeper_pidfd, POLLIN, 0 };
		while (poll(&pf, 1, 10000) < 0 && errno == EINTR)
			;
		siginfo_t si;
		waitid(P_PIDFD, (id_t)sb->keeper_pidfd, &si, WEXITED);
		close(sb->keeper_pidfd);
	}
	sb->keeper_pidfd = -1;
	if (sb->ctl_fd >= 0)
		close(sb->ctl_fd);
	if (sb->exec_fd >= 0)
		close(sb->exec_fd);
	sb->ctl_fd = sb->exec_fd = -1;
	/* Only now: every process of the sandbox died with its keeper (its pid
	 * namespace's init, waited for above), so a program started ahead and
	 * never given a call cannot read its stdin's end as an empty prompt. */
	sb_exec_held_close(sb);
}

/* The keeper's socket broke: say how the keeper ended, for the log. */
int sb_keeper_died(ah_sandbox *sb, ah_err *err)
{
	int e = errno;
	siginfo_t si = { 0 };
	poll(&(struct pollfd){ sb->keeper_pidfd, POLLIN, 0 }, 1, 1000);
	waitid(P_PIDFD, (id_t)sb->keeper_pidfd, &si, WEXITED | WNOHANG | WNOWAIT);
	return ah_err_set(err, AH_EFAIL, "sandbox keeper died (%s; exit code %d, status %d)",
	                  strerror(e), si.si_code, si.si_status);
}

/* Waits for one message on the keeper's socket, at most timeout_ms. */
int sb_keeper_reply(ah_sandbox *sb, int want, int timeout_ms, ah_err *err)
{
	struct pollfd pf = { sb->ctl_fd, POLLIN, 0 };
	int r;
	while ((r = poll(&pf, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return ah_err_set(err, AH_ETIMEOUT, "sandbox keeper did not answer");
	sb_msg m;
	if (sb_recv(sb->ctl_fd, &m, NULL, 0, NULL, NULL, NULL) != 1)
		return sb_keeper_died(sb, err);
	if (m.op == SB_ERROR) {
		m.msg[sizeof m.msg - 1] = '\0';
		return ah_err_set(err, AH_EFAIL, "sandbox set-up: %s", m.msg);
	}
	if (m.op != want)
		return ah_err_set(err, AH_EFAIL, "sandbox keeper: unexpected message %d", m.op);
	return 0;
}

/* The keeper's settings, sent with GO: the plan and the host's choices. */
static void keeper_conf(const ah_sandbox *sb, sb_keeper_conf *c)
{
	memset(c, 0, sizeof *c);
	c->plan = sb->plan;
	snprintf(c->resolv, sizeof c->resolv, "%s", sb_g.resolv);
	for (int i = 0; i < 3; i++)
		sb_cgroup_join_file(&sb->plan, i, c->cg_join[i], sizeof c->cg_join[i]);
	c->seccomp_len = sb_g.seccomp.len;
	memcpy(c->seccomp, sb_g.seccomp.filter, sb_g.seccomp.len * sizeof c->seccomp[0]);
}

static int keeper_go(ah_sandbox *sb, ah_err *err)
{
	sb_keeper_conf conf;
	keeper_conf(sb, &conf);
	if (sb_send(sb->ctl_fd, &(sb_msg){ .op = SB_GO }, &conf, sizeof conf, NULL, 0) < 0)
		return sb_keeper_died(sb, err);
	int rc = sb_keeper_reply(sb, SB_READY, 10000, err);
	sb_disk_close_loop(&sb->plan); /* mounted inside now, or never */
	return rc;
}

/* The idmapped mount's user namespace depends only on the slot: made once
 * per slot we hold (it takes a throw-away process). Only the slot's owner
 * touches its entry. */
static int idmap_setup(ah_sandbox *sb, ah_err *err)
{
	int *fd = &sb_slot_of(sb)->idmap;
	if (*fd < 0)
		*fd = sb_userns_idmap_fd(sb->plan.uid_base + SB_AGENT_UID);
	if (*fd < 0)
		return ah_err_set(err, AH_EFAIL, "idmap user namespace: %s", strerror(errno));
	return 0;
}

static int disk_setup(ah_sandbox *sb, ah_err *err)
{
	int rc = sb_disk_setup(&sb->plan, err);
	if (rc == 0)
		sb_budget_note_disk(sb, sb_slot_of(sb)->lock);
	return rc;
}
static void disk_teardown(ah_sandbox *sb) { sb_disk_teardown(&sb->plan); }
/* The host's memory and disk budget (budget.c), recorded in the slot's lock
 * file; given back at destroy already (sb_release_budget), or here. */
static int budget_setup(ah_sandbox *sb, ah_err *err)
{
	return sb_budget_admit(sb, sb_slot_of(sb)->lock, err);
}

void sb_release_budget(ah_sandbox *sb)
{
	if (sb->plan.slot >= 0)
		sb_budget_release(sb, sb_slot_of(sb)->lock);
}

int sb_net_setup(ah_sandbox *sb, ah_err *err)
{
	sb_egress_reset(sb); /* the slot's last sandbox may have had an allow-list */
	return sb_net_slot_setup(&sb->plan, &sb_slot_of(sb)->netns, err);
}

/* The set-up order matters: the cgroup exists before GO (the keeper moves
 * itself in then, before anything else), the slot's network namespace before
 * the keeper (which joins it); GO comes last, once everything the keeper needs
 * from outside is there. */
static const struct step {
	const char *name;
	int (*setup)(ah_sandbox *sb, ah_err *err);
	void (*teardown)(ah_sandbox *sb);
} STEPS[] = {
	{ "slot",          sb_slot_take,      sb_slot_release },
	{ "budget",        budget_setup,      sb_release_budget },
	{ "idmap",         idmap_setup,       NULL },           /* the slot's, kept */
	{ "cgroup",        sb_cgroup_setup,   sb_cgroup_teardown },
	{ "disk",          disk_setup,        disk_teardown },
	{ "network",       sb_net_setup,         NULL },           /* the slot's, kept */
	{ "keeper",        keeper_spawn,      keeper_kill },
	{ "inside",        keeper_go,         NULL },
};
#define NSTEPS ((int)(sizeof STEPS / sizeof STEPS[0]))

static void make_plan(ah_sandbox *sb, long long disk_bytes)
{
	sb_plan *p = &sb->plan;
	memcpy(p->id, "sbx_", 4);
	ah_base62_random(p->id + 4, 22);
	p->memory_bytes = sb_g.memory_bytes;
	p->disk_bytes = disk_bytes > 0 ? disk_bytes : sb_g.disk_bytes;
	p->cpus = sb_g.cpus;
	p->pids_max = sb_g.pids_max;
	p->nofile = sb_g.nofile;
	p->loop_fd = p->disk_fd = -1;
	/* sb_g.root is at most 240 characters (read_config). */
	snprintf(p->root_mnt, sizeof p->root_mnt, "%.240s/root", sb_g.root);
	snprintf(p->disk_file, sizeof p->disk_file, "%s/disk-%s.img", sb_g.root, p->id);
}

int sb_build(ah_sandbox **out, long long disk_bytes, bool ahead, ah_err *err)
{
	ah_sandbox *sb = calloc(1, sizeof *sb);
	if (!sb)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	sb->keeper_pidfd = sb->ctl_fd = sb->exec_fd = sb->oom_fd = -1;
	sb->oom_kills = -1;
	sb->plan.slot = -1;
	sb->ahead = ahead;
	make_plan(sb, disk_bytes);
	for (int i = 0; i < NSTEPS; i++) {
		int rc = STEPS[i].setup(sb, err);
		sb->nsteps_done = i + 1;
		if (rc) {
			if (rc != AH_EBUSY) /* the budget's refusals are the caller's to report */
				ah_log_warn("sandbox %s: step %s failed: %s", sb->plan.id, STEPS[i].name,
				            err ? err->msg : "");
			sb_teardown(sb);
			return rc;
		}
	}
	*out = sb;
	return 0;
}

void sb_teardown(ah_sandbox *sb)
{
	for (int i = sb->nsteps_done - 1; i >= 0; i--)
		if (STEPS[i].teardown)
			STEPS[i].teardown(sb);
	free(sb);
}
