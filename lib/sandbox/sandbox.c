/* Sandbox life cycle: the plan, and one flat ordered list of host-side steps,
 * each with its set-up and tear-down (as nsjail and bubblewrap do it).
 *
 * ah_sandbox_init reads the configuration into sb_g, then create takes a
 * pre-built sandbox from the pool and claims it (mounts /app); destroy tears
 * the steps down in reverse. The steps inside the sandbox (cgroup namespace,
 * network, root filesystem, user namespace) are the keeper's: see inside.c. */
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

sb_global sb_g;
static bool inited;

/* ---- slots: uid range, addresses and veth name of a live sandbox ----
 *
 * Several runner processes (and the CLI) may share a host, so a slot is owned
 * through a host-wide lock file: flock is released by the kernel when the
 * owner dies, and whoever takes the slot next clears what a dead owner left
 * (cgroup, veth). Nobody ever touches a slot it does not hold.
 *
 * A process keeps holding a slot after its sandbox is gone, with what can be
 * reused by the slot's next sandbox: the network namespace (net.c) and the
 * idmapped mount's user namespace. Slots held this way are taken first; all
 * are let go at shutdown. */

#define SB_LOCK_DIR "/run/agenthost-sandbox"
#define SB_SLOTS_MAX 16384

static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER;
static struct slot {
	bool used;       /* a sandbox has it */
	int lock;        /* the flock'ed lock file while we hold the slot, else -1 */
	int idmap;       /* user namespace for /app's idmapped mount, or -1 */
	int netns;       /* network namespace, configured, or -1 */
} slots[SB_SLOTS_MAX];

static void slots_init(void)
{
	for (int i = 0; i < SB_SLOTS_MAX; i++)
		slots[i] = (struct slot){ .lock = -1, .idmap = -1, .netns = -1 };
}

static int lock_slot(int i)
{
	char path[64];
	snprintf(path, sizeof path, SB_LOCK_DIR "/slot-%d.lock", i);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void fill_slot(sb_plan *p)
{
	unsigned base = (sb_g.net_a << 24) | (sb_g.net_b << 16) | ((unsigned)p->slot * 4);
	p->host_ip = htonl(base + 1);
	p->sb_ip = htonl(base + 2);
	p->uid_base = sb_g.uid_base + (unsigned)p->slot * SB_IDS_PER_SLOT;
	snprintf(p->veth, sizeof p->veth, "ahs%d", p->slot);
}

/* A free slot: one we hold already if any, else one we can lock. */
static int pick_slot(bool *fresh)
{
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < sb_g.max_slots; i++) {
			struct slot *s = &slots[i];
			if (s->used || (pass == 0) != (s->lock >= 0))
				continue;
			if (pass == 1 && (s->lock = lock_slot(i)) < 0)
				continue;
			s->used = true;
			*fresh = pass == 1;
			return i;
		}
	return -1;
}

static int slot_take(ah_sandbox *sb, ah_err *err)
{
	sb_plan *p = &sb->plan;
	bool fresh = false;
	pthread_mutex_lock(&slot_mu);
	p->slot = pick_slot(&fresh);
	pthread_mutex_unlock(&slot_mu);
	if (p->slot < 0)
		return ah_err_set(err, AH_ETOOBIG, "all %d sandbox slots are in use", sb_g.max_slots);
	fill_slot(p);
	if (fresh) {
		sb_cgroup_clear_slot(sb);
		sb_net_host_teardown(p);
	}
	return 0;
}

/* At init: clear every slot whose owner died (runner killed), so that no
 * crashed run's cgroup or veth waits for its slot to be reused. */
static void sweep_free_slots(void)
{
	ah_sandbox tmp = { 0 };
	for (int i = 0; i < sb_g.max_slots; i++) {
		char path[64];
		snprintf(path, sizeof path, SB_LOCK_DIR "/slot-%d.lock", i);
		if (access(path, F_OK) < 0)
			continue;
		int fd = lock_slot(i);
		if (fd < 0)
			continue;
		tmp.plan.slot = i;
		fill_slot(&tmp.plan);
		sb_cgroup_clear_slot(&tmp);
		sb_net_host_teardown(&tmp.plan);
		close(fd);
	}
}

/* The sandbox is gone; we keep the slot (see above). */
static void slot_release(ah_sandbox *sb)
{
	pthread_mutex_lock(&slot_mu);
	if (sb->plan.slot >= 0)
		slots[sb->plan.slot].used = false;
	pthread_mutex_unlock(&slot_mu);
}

/* Shutdown: every slot we hold goes, with what it kept. */
static void slots_let_go(void)
{
	for (int i = 0; i < SB_SLOTS_MAX; i++) {
		struct slot *s = &slots[i];
		if (s->lock < 0 || s->used)
			continue;
		sb_plan p = { .slot = i };
		fill_slot(&p);
		sb_net_slot_drop(&p, &s->netns);
		if (s->idmap >= 0)
			close(s->idmap);
		close(s->lock);
		*s = (struct slot){ .lock = -1, .idmap = -1, .netns = -1 };
	}
}

/* ---- keeper process ---- */

/* The child of keeper_spawn, on a stack of its own in the runner's memory
 * while the runner's thread waits (CLONE_VM | CLONE_VFORK, as posix_spawn
 * does): it only joins the slot's network namespace, puts its two sockets at
 * 3 and 4 and execs agenthost-keeper. Its descriptor table is its own copy;
 * signals are blocked until the exec. */
typedef struct keeper_child {
	int ctl, ex, netns;
} keeper_child;

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
	int ctl[2], ex[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0)
		return ah_err_set(err, AH_EFAIL, "socketpair: %s", strerror(errno));
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ex) < 0) {
		close(ctl[0]);
		close(ctl[1]);
		return ah_err_set(err, AH_EFAIL, "socketpair: %s", strerror(errno));
	}
	keeper_child child = { ctl[1], ex[1], slots[sb->plan.slot].netns };
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
}

/* The keeper's socket broke: say how the keeper ended, for the log. */
static int keeper_died(ah_sandbox *sb, ah_err *err)
{
	int e = errno;
	siginfo_t si = { 0 };
	poll(&(struct pollfd){ sb->keeper_pidfd, POLLIN, 0 }, 1, 1000);
	waitid(P_PIDFD, (id_t)sb->keeper_pidfd, &si, WEXITED | WNOHANG | WNOWAIT);
	return ah_err_set(err, AH_EFAIL, "sandbox keeper died (%s; exit code %d, status %d)",
	                  strerror(e), si.si_code, si.si_status);
}

/* Waits for one message on the keeper's socket, at most timeout_ms. */
static int keeper_reply(ah_sandbox *sb, int want, int timeout_ms, ah_err *err)
{
	struct pollfd pf = { sb->ctl_fd, POLLIN, 0 };
	int r;
	while ((r = poll(&pf, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return ah_err_set(err, AH_ETIMEOUT, "sandbox keeper did not answer");
	sb_msg m;
	if (sb_recv(sb->ctl_fd, &m, NULL, 0, NULL, NULL, NULL) != 1)
		return keeper_died(sb, err);
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
		return keeper_died(sb, err);
	int rc = keeper_reply(sb, SB_READY, 10000, err);
	sb_disk_close_loop(&sb->plan); /* mounted inside now, or never */
	return rc;
}

/* The idmapped mount's user namespace depends only on the slot: made once
 * per slot we hold (it takes a throw-away process). Only the slot's owner
 * touches its entry. */
static int idmap_setup(ah_sandbox *sb, ah_err *err)
{
	int *fd = &slots[sb->plan.slot].idmap;
	if (*fd < 0)
		*fd = sb_userns_idmap_fd(sb->plan.uid_base + SB_AGENT_UID);
	if (*fd < 0)
		return ah_err_set(err, AH_EFAIL, "idmap user namespace: %s", strerror(errno));
	return 0;
}

static int disk_setup(ah_sandbox *sb, ah_err *err) { return sb_disk_setup(&sb->plan, err); }
static void disk_teardown(ah_sandbox *sb) { sb_disk_teardown(&sb->plan); }
static int net_setup(ah_sandbox *sb, ah_err *err)
{
	return sb_net_slot_setup(&sb->plan, &slots[sb->plan.slot].netns, err);
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
	{ "slot",          slot_take,         slot_release },
	{ "idmap",         idmap_setup,       NULL },           /* the slot's, kept */
	{ "cgroup",        sb_cgroup_setup,   sb_cgroup_teardown },
	{ "disk",          disk_setup,        disk_teardown },
	{ "network",       net_setup,         NULL },           /* the slot's, kept */
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
	p->loop_fd = -1;
	/* sb_g.root is at most 240 characters (read_config). */
	snprintf(p->root_mnt, sizeof p->root_mnt, "%.240s/root", sb_g.root);
	snprintf(p->disk_file, sizeof p->disk_file, "%s/disk-%s.img", sb_g.root, p->id);
}

int sb_build(ah_sandbox **out, long long disk_bytes, ah_err *err)
{
	ah_sandbox *sb = calloc(1, sizeof *sb);
	if (!sb)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	sb->keeper_pidfd = sb->ctl_fd = sb->exec_fd = -1;
	sb->oom_kills = -1;
	sb->plan.slot = -1;
	make_plan(sb, disk_bytes);
	for (int i = 0; i < NSTEPS; i++) {
		int rc = STEPS[i].setup(sb, err);
		sb->nsteps_done = i + 1;
		if (rc) {
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

/* ---- a slot's network namespace, lent ----
 *
 * Only the slot and network steps: the namespace stays the slot's, and since
 * the borrower's connections leave sockets behind (TIME_WAIT), the slot's next
 * sandbox gets a fresh one (sb_net_slot_setup). */
struct ah_sandbox_net {
	ah_sandbox sb;
};

int ah_sandbox_net_borrow(ah_sandbox_net **out, ah_err *err)
{
	if (!inited)
		return ah_err_set(err, AH_EFAIL, "sandboxes are not initialised");
	ah_sandbox_net *n = calloc(1, sizeof *n);
	if (!n)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	n->sb.plan.slot = -1;
	int rc = slot_take(&n->sb, err);
	if (rc == 0 && (rc = net_setup(&n->sb, err)) != 0)
		slot_release(&n->sb);
	if (rc != 0) {
		free(n);
		return rc;
	}
	*out = n;
	return 0;
}

int ah_sandbox_net_fd(const ah_sandbox_net *n)
{
	return slots[n->sb.plan.slot].netns;
}

const char *ah_sandbox_net_resolv(void)
{
	return sb_g.resolv;
}

void ah_sandbox_net_return(ah_sandbox_net *n)
{
	if (!n)
		return;
	slot_release(&n->sb);
	free(n);
}

/* ---- configuration ---- */

static void add_dns(const char *s)
{
	struct in_addr a;
	if (sb_g.ndns >= SB_MAX_NS || inet_pton(AF_INET, s, &a) != 1)
		return;
	if ((ntohl(a.s_addr) >> 24) == 127) {
		ah_log_warn("sandbox: resolver %s is on the host's loopback, which sandboxes "
		            "cannot reach; set sandbox_dns", s);
		return;
	}
	sb_g.dns[sb_g.ndns++] = a.s_addr;
}

/* sandbox_dns (comma separated), else the nameservers of /etc/resolv.conf. */
static void read_dns(const ah_config *cfg)
{
	const char *conf = ah_cfg_str(cfg, AH_CFG_SANDBOX_DNS);
	char buf[256], line[512];
	if (conf[0]) {
		snprintf(buf, sizeof buf, "%s", conf);
		for (char *p = buf, *c; p; p = c ? c + 1 : NULL) {
			c = strchr(p, ',');
			if (c)
				*c = '\0';
			add_dns(p);
		}
	} else {
		FILE *f = fopen("/etc/resolv.conf", "re");
		while (f && fgets(line, sizeof line, f)) {
			char ns[64];
			if (sscanf(line, " nameserver %63s", ns) == 1)
				add_dns(ns);
		}
		if (f)
			fclose(f);
	}
	size_t o = 0;
	for (int i = 0; i < sb_g.ndns && o < sizeof sb_g.resolv; i++) {
		char s[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &sb_g.dns[i], s, sizeof s);
		o += (size_t)snprintf(sb_g.resolv + o, sizeof sb_g.resolv - o, "nameserver %s\n", s);
	}
}

static int mkdir_p(const char *path)
{
	char b[PATH_MAX];
	snprintf(b, sizeof b, "%s", path);
	for (char *p = b + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			if (mkdir(b, 0755) < 0 && errno != EEXIST)
				return -1;
			*p = '/';
		}
	return mkdir(b, 0700) < 0 && errno != EEXIST ? -1 : 0;
}

static int read_config(const ah_config *cfg, ah_err *err)
{
	const char *root = ah_cfg_str(cfg, AH_CFG_SANDBOX_ROOT);
	char abs[PATH_MAX];
	if (mkdir_p(root) < 0)
		return ah_err_set(err, AH_EFAIL, "mkdir %s: %s", root, strerror(errno));
	if (!realpath(root, abs) || strlen(abs) >= sizeof sb_g.root - 16)
		return ah_err_set(err, AH_EINVALID, "sandbox_root %s: unusable", root);
	snprintf(sb_g.root, sizeof sb_g.root, "%s", abs);
	sb_g.memory_bytes = ah_cfg_int(cfg, AH_CFG_SANDBOX_MEMORY_MB) << 20;
	sb_g.disk_bytes = ah_cfg_int(cfg, AH_CFG_SANDBOX_DISK_MB) << 20;
	sb_g.cpus = (int)ah_cfg_int(cfg, AH_CFG_SANDBOX_CPUS);
	sb_g.pids_max = (int)ah_cfg_int(cfg, AH_CFG_SANDBOX_PIDS);
	sb_g.nofile = (int)ah_cfg_int(cfg, AH_CFG_SANDBOX_NOFILE);
	sb_g.pool_size = (int)ah_cfg_int(cfg, AH_CFG_SANDBOX_POOL_SIZE);
	sb_g.pool_max = (int)ah_cfg_int(cfg, AH_CFG_SANDBOX_POOL_MAX);
	sb_g.max_slots = (int)ah_cfg_int(cfg, AH_CFG_SANDBOX_MAX);
	sb_g.uid_base = (unsigned)ah_cfg_int(cfg, AH_CFG_SANDBOX_UID_BASE);
	sb_g.allow_host = ah_cfg_bool(cfg, AH_CFG_SANDBOX_ALLOW_LOOPBACK_EGRESS);
	const char *net = ah_cfg_str(cfg, AH_CFG_SANDBOX_NET);
	if (sscanf(net, "%u.%u", &sb_g.net_a, &sb_g.net_b) != 2 || sb_g.net_a > 255 || sb_g.net_b > 255)
		return ah_err_set(err, AH_EINVALID, "sandbox_net %s: want two octets like 10.254", net);
	read_dns(cfg);
	return 0;
}

/* agenthost-keeper: sandbox_keeper if set, else next to this program (an
 * install), else where the build put it. Opened once: every keeper is exec'd
 * from this descriptor. */
static int open_keeper(const ah_config *cfg, ah_err *err)
{
	char self[PATH_MAX], here[PATH_MAX + 32];
	const char *conf = ah_cfg_str(cfg, AH_CFG_SANDBOX_KEEPER);
	const char *tries[3] = { conf[0] ? conf : NULL, NULL, conf[0] ? NULL : AH_KEEPER_PATH };
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (!conf[0] && n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			snprintf(here, sizeof here, "%s/agenthost-keeper", self);
			tries[1] = here;
		}
	}
	for (int i = 0; i < 3; i++) {
		if (!tries[i] || access(tries[i], X_OK) < 0)
			continue;
		sb_g.keeper_exe = open(tries[i], O_PATH | O_CLOEXEC);
		if (sb_g.keeper_exe >= 0)
			return 0;
	}
	return ah_err_set(err, AH_EINVALID, "agenthost-keeper not found (%s); set sandbox_keeper",
	                  conf[0] ? conf : AH_KEEPER_PATH);
}

/* The policy is shared by every runner process on the host: each holds a
 * shared lock on it while alive, and the last one out removes it. */
static int policy_lock = -1;

static int policy_acquire(ah_err *err)
{
	if (mkdir(SB_LOCK_DIR, 0700) < 0 && errno != EEXIST)
		return ah_err_set(err, AH_EFAIL, "mkdir " SB_LOCK_DIR ": %s", strerror(errno));
	policy_lock = open(SB_LOCK_DIR "/policy.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (policy_lock < 0 || flock(policy_lock, LOCK_SH) < 0)
		return ah_err_set(err, AH_EFAIL, "policy lock: %s", strerror(errno));
	return sb_net_policy_install(err);
}

static void policy_release(void)
{
	if (policy_lock < 0)
		return;
	if (flock(policy_lock, LOCK_EX | LOCK_NB) == 0)
		sb_net_policy_remove();
	close(policy_lock);
	policy_lock = -1;
}

/* ---- public API ---- */

int ah_sandbox_init(const ah_config *cfg, ah_err *err)
{
	if (inited)
		return 0;
	if (geteuid() != 0)
		return ah_err_set(err, AH_EDENIED, "sandboxes need root");
	int rc;
	sb_g.keeper_exe = -1;
	slots_init();
	if ((rc = read_config(cfg, err)) || (rc = sb_cgroup_init(err)) ||
	    (rc = sb_seccomp_build(&sb_g.seccomp, err)) || (rc = open_keeper(cfg, err)))
		return rc;
	char dir[300];
	snprintf(dir, sizeof dir, "%s/root", sb_g.root);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return ah_err_set(err, AH_EFAIL, "mkdir %s: %s", dir, strerror(errno));
	if ((rc = policy_acquire(err))) {
		policy_release();
		return rc;
	}
	sweep_free_slots();
	if (sb_write_file("/proc/sys/net/ipv4/ip_forward", "1") < 0) {
		policy_release();
		return ah_err_set(err, AH_EFAIL, "enable ip_forward: %s", strerror(errno));
	}
	if ((rc = sb_pool_start(err))) {
		policy_release();
		return rc;
	}
	inited = true;
	ah_log_info("sandbox: ready (cgroup v%d, %d resolver(s), pool %d, up to %d after bursts)",
	            sb_g.cg == SB_CG_V2 ? 2 : 1, sb_g.ndns, sb_g.pool_size, sb_g.pool_max);
	return 0;
}

static int claim_limits(ah_sandbox *sb, const ah_sandbox_spec *s, ah_err *err)
{
	sb_plan *p = &sb->plan;
	bool change = false;
	if (s->memory_bytes > 0 && s->memory_bytes != p->memory_bytes)
		p->memory_bytes = s->memory_bytes, change = true;
	if (s->cpus > 0 && s->cpus != p->cpus)
		p->cpus = s->cpus, change = true;
	if (s->pids_max > 0 && s->pids_max != p->pids_max)
		p->pids_max = s->pids_max, change = true;
	if (s->nofile > 0)
		p->nofile = s->nofile;
	return change ? sb_cgroup_set_limits(sb, err) : 0;
}

/* Shows the image at /app, as the lower layer of an overlay whose upper layer
 * is on the sandbox's own disk: nothing a sandbox writes, a build's included,
 * lands in the host's file system. The keeper gets a detached copy of the
 * directory's mount (open_tree), not a path: it never sees the host's tree. */
static int claim_app(ah_sandbox *sb, const ah_sandbox_spec *s, ah_err *err)
{
	const char *dir = s->image_dir;
	if (!dir)
		return ah_err_set(err, AH_EINVALID, "sandbox spec needs image_dir");
	sb->deploy = s->build;
	int fd = (int)syscall(SYS_open_tree, AT_FDCWD, dir,
	                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (fd < 0)
		return ah_err_set(err, AH_EINVALID, "%s: %s", dir, strerror(errno));
	/* Root's files appear as the agent's (see userns.c). */
	struct mount_attr a = { .attr_set = MOUNT_ATTR_IDMAP,
	                        .userns_fd = (uint64_t)slots[sb->plan.slot].idmap };
	if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) < 0) {
		int e = errno;
		close(fd);
		return ah_err_set(err, AH_EFAIL, "idmapped mount of %s: %s", dir, strerror(e));
	}
	sb_msg m = { .op = SB_MOUNT_APP };
	int rc = sb_send(sb->ctl_fd, &m, NULL, 0, &fd, 1) < 0
	         ? keeper_died(sb, err)
	         : keeper_reply(sb, SB_OK, 10000, err);
	close(fd);
	return rc;
}

int ah_sandbox_create(ah_sandbox **out, const ah_sandbox_spec *spec, ah_err *err)
{
	*out = NULL;
	if (!inited)
		return ah_err_set(err, AH_EINVALID, "ah_sandbox_init was not called");
	ah_sandbox *sb = NULL;
	int rc = sb_pool_take(&sb, spec->disk_bytes, !spec->ahead, err);
	if (rc)
		return rc;
	if ((rc = claim_limits(sb, spec, err)) || (rc = claim_app(sb, spec, err))) {
		ah_sandbox_destroy(sb);
		return rc;
	}
	sb->claimed = true;
	*out = sb;
	return 0;
}

int ah_sandbox_exec(ah_sandbox *sb, const ah_sandbox_exec_spec *x, ah_sandbox_result *out,
                    ah_err *err)
{
	memset(out, 0, sizeof *out);
	if (sb->broken)
		return ah_err_set(err, AH_EFAIL, "sandbox %s is broken", sb->plan.id);
	int rc = sb_exec_run(sb, x, out, err);
	if (rc == AH_EFAIL)
		sb->broken = true;
	return rc;
}

void ah_sandbox_result_free(ah_sandbox_result *r)
{
	free(r->out);
	free(r->err_tail);
	r->out = r->err_tail = NULL;
}

const char *ah_sandbox_id(const ah_sandbox *sb)
{
	return sb->plan.id;
}

int ah_sandbox_listen_loopback(const ah_sandbox *sb, int port, int *out, ah_err *err)
{
	return sb_net_listen_loopback(slots[sb->plan.slot].netns, port, out, err);
}

/* The processes die now (SIGKILL to the pid namespace's init); the rest
 * (reaping, the mount namespace, veth, cgroup: ~25 ms, mostly RCU grace
 * periods) is released by the pool's reaper thread, off the caller's path.
 * A build sandbox is torn down here: its caller removes the source tree
 * under its overlay right after. */
void ah_sandbox_destroy(ah_sandbox *sb)
{
	if (!sb)
		return;
	if (sb->deploy || !inited) {
		sb_teardown(sb);
		return;
	}
	if (sb->keeper_pidfd >= 0)
		syscall(SYS_pidfd_send_signal, sb->keeper_pidfd, SIGKILL, NULL, 0);
	sb_pool_retire(sb);
}

void ah_sandbox_shutdown(void)
{
	if (!inited)
		return;
	sb_pool_stop();
	policy_release();
	slots_let_go();
	free(sb_g.seccomp.filter);
	sb_g.seccomp.filter = NULL;
	close(sb_g.keeper_exe);
	sb_g.keeper_exe = -1;
	inited = false;
}
