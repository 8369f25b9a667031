/* The sandbox API (sandbox.h): ah_sandbox_init reads the configuration into
 * sb_g, then create takes a pre-built sandbox from the pool (pool.c, which
 * builds them with the steps of steps.c in slots of slots.c) and claims it
 * (limits, /app); destroy gives it back to the pool's reaper, which tears the
 * steps down in reverse. */
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
	int rc = sb_slot_take(&n->sb, err);
	if (rc == 0 && (rc = sb_net_setup(&n->sb, err)) != 0)
		sb_slot_release(&n->sb);
	if (rc != 0) {
		free(n);
		return rc;
	}
	*out = n;
	return 0;
}

int ah_sandbox_net_fd(const ah_sandbox_net *n)
{
	return sb_slot_of(&n->sb)->netns;
}

const char *ah_sandbox_net_resolv(void)
{
	return sb_g.resolv;
}

void ah_sandbox_net_return(ah_sandbox_net *n)
{
	if (!n)
		return;
	sb_slot_release(&n->sb);
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
static void read_dns(const ah_sandbox_settings *set)
{
	const char *conf = set->dns;
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

static bool cgroup_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n >= sizeof sb_g.cg_name)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
		      s[i] == '_'))
			return false;
	return true;
}

static int read_config(const ah_sandbox_settings *set, ah_err *err)
{
	const char *root = set->root;
	char abs[PATH_MAX];
	if (mkdir_p(root) < 0)
		return ah_err_set(err, AH_EFAIL, "mkdir %s: %s", root, strerror(errno));
	if (!realpath(root, abs) || strlen(abs) >= sizeof sb_g.root - 16)
		return ah_err_set(err, AH_EINVALID, "sandbox_root %s: unusable", root);
	snprintf(sb_g.root, sizeof sb_g.root, "%s", abs);
	sb_g.memory_bytes = set->memory_mb << 20;
	sb_g.disk_bytes = set->disk_mb << 20;
	sb_g.cpus = (int)set->cpus;
	sb_g.pids_max = (int)set->pids;
	sb_g.nofile = (int)set->nofile;
	sb_g.pool_size = (int)set->pool_size;
	sb_g.pool_max = (int)set->pool_max;
	sb_g.max_slots = (int)set->max;
	sb_g.uid_base = (unsigned)set->uid_base;
	sb_g.allow_host = set->allow_loopback_egress;
	sb_g.egress_private = set->egress_allow_private;
	const char *cg = set->cgroup;
	if (!cgroup_name_ok(cg))
		return ah_err_set(err, AH_EINVALID, "sandbox_cgroup %s: want 1-63 of [a-z0-9_-]", cg);
	snprintf(sb_g.cg_name, sizeof sb_g.cg_name, "%s", cg);
	const char *net = set->net;
	if (sscanf(net, "%u.%u", &sb_g.net_a, &sb_g.net_b) != 2 || sb_g.net_a > 255 || sb_g.net_b > 255)
		return ah_err_set(err, AH_EINVALID, "sandbox_net %s: want two octets like 10.254", net);
	read_dns(set);
	return 0;
}

/* agenthost-keeper: sandbox_keeper if set, else next to this program, else in
 * the build tree's lib/sandbox beside this program's directory (a runner run
 * from the build), else where meson installs it (libexec/agenthost). Opened
 * once: every keeper is exec'd from this descriptor. */
static int open_keeper(const ah_sandbox_settings *set, ah_err *err)
{
	char self[PATH_MAX], here[PATH_MAX + 32], built[PATH_MAX + 48];
	const char *conf = set->keeper;
	const char *tries[4] = { conf[0] ? conf : NULL, NULL, NULL, conf[0] ? NULL : AH_KEEPER_PATH };
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (!conf[0] && n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			snprintf(here, sizeof here, "%s/agenthost-keeper", self);
			snprintf(built, sizeof built, "%s/../sandbox/agenthost-keeper", self);
			tries[1] = here;
			tries[2] = built;
		}
	}
	for (int i = 0; i < 4; i++) {
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

int ah_sandbox_init(const ah_sandbox_settings *set, ah_err *err)
{
	if (inited)
		return 0;
	if (geteuid() != 0)
		return ah_err_set(err, AH_EDENIED, "sandboxes need root");
	int rc;
	sb_g.keeper_exe = -1;
	sb_slots_init();
	if ((rc = read_config(set, err)) || (rc = sb_cgroup_init(err)) ||
	    (rc = sb_budget_init(set, err)) ||
	    (rc = sb_seccomp_build(&sb_g.seccomp, err)) || (rc = open_keeper(set, err)))
		return rc;
	char dir[300];
	snprintf(dir, sizeof dir, "%s/root", sb_g.root);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return ah_err_set(err, AH_EFAIL, "mkdir %s: %s", dir, strerror(errno));
	if ((rc = policy_acquire(err))) {
		policy_release();
		return rc;
	}
	sb_slots_sweep();
	if (sb_write_file("/proc/sys/net/ipv4/ip_forward", "1") < 0) {
		policy_release();
		return ah_err_set(err, AH_EFAIL, "enable ip_forward: %s", strerror(errno));
	}
	if ((rc = sb_pool_start(err))) {
		policy_release();
		return rc;
	}
	inited = true;
	ah_log_info("sandbox: ready (cgroup %s under %s, %d resolver(s), pool %d, up to %d after bursts)",
	            sb_cgroup_layout(), sb_cgroup_parent(), sb_g.ndns, sb_g.pool_size, sb_g.pool_max);
	return 0;
}

static int claim_limits(ah_sandbox *sb, const ah_sandbox_spec *s, ah_err *err)
{
	sb_plan *p = &sb->plan;
	bool change = false;
	if (s->memory_bytes > 0 && s->memory_bytes != p->memory_bytes) {
		p->memory_bytes = s->memory_bytes, change = true;
		/* Admitted with the default cap: the budget must hold this one. */
		int rc = sb_budget_admit(sb, sb_slot_of(sb)->lock, err);
		if (rc)
			return rc;
	}
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
	                        .userns_fd = (uint64_t)sb_slot_of(sb)->idmap };
	if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) < 0) {
		int e = errno;
		close(fd);
		return ah_err_set(err, AH_EFAIL, "idmapped mount of %s: %s", dir, strerror(e));
	}
	sb_msg m = { .op = SB_MOUNT_APP };
	int rc = sb_send(sb->ctl_fd, &m, NULL, 0, &fd, 1) < 0
	         ? sb_keeper_died(sb, err)
	         : sb_keeper_reply(sb, SB_OK, 10000, err);
	close(fd);
	return rc;
}

/* Each bind after /app: a detached copy of the host directory's mount, its
 * flags set here (read-only for a read-only mount), attached by the keeper. */
static int claim_binds(ah_sandbox *sb, const ah_sandbox_spec *s, ah_err *err)
{
	for (size_t i = 0; i < s->nbinds; i++) {
		const ah_sandbox_bind *b = &s->binds[i];
		size_t len = strlen(b->path) + 1;
		if (b->path[0] != '/' || len > 256)
			return ah_err_set(err, AH_EINVALID, "bind path %.80s not allowed", b->path);
		int fd = (int)syscall(SYS_open_tree, AT_FDCWD, b->host_dir,
		                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (fd < 0)
			return ah_err_set(err, AH_EFAIL, "%s: %s", b->path, strerror(errno));
		struct mount_attr a = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
		                                    (b->read_only ? MOUNT_ATTR_RDONLY : 0) };
		int rc = 0;
		if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &a, sizeof a) < 0)
			rc = ah_err_set(err, AH_EFAIL, "%s: flags: %s", b->path, strerror(errno));
		sb_msg m = { .op = SB_MOUNT_BIND };
		if (rc == 0)
			rc = sb_send(sb->ctl_fd, &m, b->path, len, &fd, 1) < 0
			     ? sb_keeper_died(sb, err)
			     : sb_keeper_reply(sb, SB_OK, 10000, err);
		close(fd);
		if (rc != 0)
			return rc;
	}
	return 0;
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
	if ((rc = claim_limits(sb, spec, err)) || (rc = claim_app(sb, spec, err)) ||
	    (rc = claim_binds(sb, spec, err)) || (rc = sb_egress_claim(sb, spec->egress, err))) {
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
	/* One program at a time: one started ahead gives way. */
	if (sb->held.on && ah_sandbox_exec_cancel(sb, x->log_tag) != 0)
		return ah_err_set(err, AH_EFAIL, "sandbox %s: the held program did not stop", sb->plan.id);
	int rc = sb_exec_run(sb, x, out, err);
	if (rc == AH_EFAIL)
		sb->broken = true;
	return rc;
}

int ah_sandbox_exec_start(ah_sandbox *sb, const ah_sandbox_exec_spec *x, ah_err *err)
{
	if (sb->broken)
		return ah_err_set(err, AH_EFAIL, "sandbox %s is broken", sb->plan.id);
	int rc = sb_exec_begin(sb, x, err);
	if (rc == AH_EFAIL)
		sb->broken = true;
	return rc;
}

bool ah_sandbox_exec_waiting(const ah_sandbox *sb)
{
	return sb_exec_held_alive(sb);
}

bool ah_sandbox_exec_reading(const ah_sandbox *sb)
{
	return sb_exec_held_reading(sb);
}

int ah_sandbox_exec_finish(ah_sandbox *sb, const ah_sandbox_exec_spec *x, ah_sandbox_result *out,
                           ah_err *err)
{
	memset(out, 0, sizeof *out);
	if (sb->broken)
		return ah_err_set(err, AH_EFAIL, "sandbox %s is broken", sb->plan.id);
	int rc = sb_exec_finish(sb, x, out, err);
	if (rc == AH_EFAIL)
		sb->broken = true;
	return rc;
}

int ah_sandbox_exec_cancel(ah_sandbox *sb, const char *log_tag)
{
	if (sb_exec_cancel(sb, log_tag) == 0)
		return 0;
	sb->broken = true;
	return AH_EFAIL;
}

void ah_sandbox_result_free(ah_sandbox_result *r)
{
	free(r->out);
	free(r->err_tail);
	free(r->err_log);
	r->out = r->err_tail = r->err_log = NULL;
}

const char *ah_sandbox_id(const ah_sandbox *sb)
{
	return sb->plan.id;
}

pid_t ah_sandbox_pid(const ah_sandbox *sb)
{
	return sb->keeper;
}

int ah_sandbox_listen_loopback(const ah_sandbox *sb, int port, int *out, ah_err *err)
{
	return sb_net_listen_loopback(sb_slot_of(sb)->netns, port, out, err);
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
	/* A held program's pipes close at the teardown (keeper_kill), once it
	 * is dead: closed here, its stdin's end reached it before the kill. */
	if (sb->deploy || !inited) {
		sb_teardown(sb);
		return;
	}
	if (sb->keeper_pidfd >= 0)
		syscall(SYS_pidfd_send_signal, sb->keeper_pidfd, SIGKILL, NULL, 0);
	/* Its processes are dying: the next sandbox may have its budget now,
	 * not only once the reaper has torn it down. */
	sb_release_budget(sb);
	sb_pool_retire(sb);
}

void ah_sandbox_shutdown(void)
{
	if (!inited)
		return;
	sb_pool_stop();
	policy_release();
	sb_slots_let_go();
	free(sb_g.seccomp.filter);
	sb_g.seccomp.filter = NULL;
	close(sb_g.keeper_exe);
	sb_g.keeper_exe = -1;
	inited = false;
}
