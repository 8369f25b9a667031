/* Internals shared by the sandbox's files: the plan (what one sandbox needs,
 * computed once), the sandbox record, the wire format between the runner and the
 * processes inside, and one set-up/tear-down pair per isolation concern.
 *
 * Processes: the runner clones the *keeper* (PID 1 of the sandbox's pid
 * namespace, still real root, in new mount/net/ipc/uts/cgroup namespaces; it
 * builds the root filesystem and later mounts /app, and never runs sandboxed
 * code). The keeper forks the *spawner*, which moves into a new user namespace
 * where root is an unprivileged host uid. For each exec the spawner clones a
 * *reaper* into a new pid namespace, and the reaper forks the *agent*, which
 * drops to uid 1000, no_new_privs, seccomp, and execs. When the agent exits the
 * reaper exits, and the kernel kills whatever the agent left behind.
 *
 * Code that runs in the keeper, spawner, reaper or agent is a raw clone of a
 * possibly multi-threaded runner: it must not malloc or use stdio locks. */
#ifndef AH_SANDBOX_INTERNAL_H
#define AH_SANDBOX_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/filter.h>

#include "core/err.h"

#define SB_AGENT_UID   1000u      /* uid/gid of programs inside */
#define SB_IDS_PER_SLOT 65536u
#define SB_MAX_NS      4          /* DNS resolvers kept */
#define SB_MSG_MAX     (256 * 1024)

/* Everything one sandbox needs, decided before anything is set up. */
typedef struct sb_plan {
	char id[32];                 /* sbx_... */
	int slot;
	long long memory_bytes, disk_bytes;
	int cpus, pids_max, nofile;
	unsigned uid_base;           /* host uid of root inside */
	uint32_t host_ip, sb_ip;     /* network byte order; /30 */
	char veth[16];               /* host side; the sandbox side is eth0 */
	char root_mnt[256];          /* empty host dir the new root is mounted on (own mntns) */
	char disk_file[512];
	char loop_dev[32];           /* set by the disk step */
	int loop_fd;
} sb_plan;

enum sb_cg_version { SB_CG_NONE, SB_CG_V1, SB_CG_V2 };

/* Process-wide state set by ah_sandbox_init. */
typedef struct sb_global {
	char root[256];              /* sandbox_root, absolute */
	enum sb_cg_version cg;
	char cg_v1[3][256];          /* memory, cpu, pids hierarchy roots + /agenthost */
	char cg_v2[256];             /* unified root + /agenthost */
	long long memory_bytes, disk_bytes;
	int cpus, pids_max, nofile, pool_size, pool_max, max_slots;
	unsigned uid_base;
	unsigned net_a, net_b;       /* veth addresses are net_a.net_b.x.y */
	char resolv[512];            /* resolv.conf for sandboxes */
	uint32_t dns[SB_MAX_NS];
	int ndns;
	bool allow_host;
	struct sock_fprog seccomp;   /* built once, loaded by every agent */
} sb_global;

extern sb_global sb_g;

struct ah_sandbox {
	sb_plan plan;
	pid_t keeper;
	int keeper_pidfd;
	int ctl_fd;                  /* runner end of the keeper's socket */
	int exec_fd;                 /* runner end of the spawner's socket */
	int cg_fd;                   /* v2: cgroup dir for CLONE_INTO_CGROUP */
	int slot_lock;               /* flock'ed slot file: the slot is ours */
	int idmap_fd;                /* userns: host 0 -> agent, for /app's idmapped mount */
	int nsteps_done;             /* host steps set up, torn down in reverse */
	bool claimed, broken;
	long long oom_kills;         /* the cgroup's count after the last exec; -1: not read yet */
	bool deploy;                 /* /app is a host dir: tear down synchronously */
	struct ah_sandbox *next;     /* pool list */
};

/* Wire format: SOCK_SEQPACKET, one struct per message, fds by SCM_RIGHTS. */
enum sb_op {
	SB_GO = 1,      /* runner → keeper: cgroup and veth are ready */
	SB_READY,       /* keeper → runner: sandbox built */
	SB_ERROR,       /* inside → runner: msg says what failed */
	SB_MOUNT_APP,   /* runner → keeper, fd = dir: arg 0 overlay lower, 1 bind rw */
	SB_OK,
	SB_EXEC,        /* runner → spawner, fds stdin/stdout/stderr, body argv/envp */
	SB_KILL,        /* runner → spawner: kill the running program's tree */
	SB_EXITED,      /* spawner → runner: arg = wait status */
};

typedef struct sb_msg {
	int op;
	int arg;
	int err;                     /* errno of the failure */
	int argc, envc;              /* SB_EXEC */
	int nofile, pids_max;        /* SB_EXEC: rlimits */
	long long fsize;
	char msg[200];               /* SB_ERROR text; SB_EXEC: cwd */
} sb_msg;

/* ---- wire helpers (inside.c) ---- */
int sb_send(int fd, const sb_msg *m, const void *body, size_t blen, const int *fds, int nfds);
/* Receives into m (+ body up to bcap, *blen set); fds (up to 3) into fds/nfds.
 * Returns 1 on a message, 0 on EOF, -1 on error. */
int sb_recv(int fd, sb_msg *m, void *body, size_t bcap, size_t *blen, int *fds, int *nfds);
int sb_error_reply(int fd, int err, const char *what);

/* ---- userns.c ---- */
int sb_userns_write_maps(pid_t pid, unsigned uid_base);
int sb_userns_become_root(void);
int sb_userns_drop_to_agent(void);
int sb_userns_idmap_fd(unsigned to);

/* ---- mounts.c (keeper side) ---- */
int sb_mounts_build_root(const sb_plan *p, const char **what);
int sb_mounts_app(int dirfd, bool writable, const char **what);

/* ---- disk.c (runner side) ---- */
int sb_disk_setup(sb_plan *p, ah_err *err);
void sb_disk_teardown(sb_plan *p);
void sb_disk_close_loop(sb_plan *p);

/* ---- net.c ---- */
int sb_net_policy_install(ah_err *err);
void sb_net_policy_remove(void);
int sb_net_host_setup(const sb_plan *p, pid_t keeper, ah_err *err);   /* runner */
void sb_net_host_teardown(const sb_plan *p);
int sb_net_inside_setup(const sb_plan *p, const char **what);         /* keeper */

/* ---- cgroup.c ---- */
int sb_cgroup_init(ah_err *err);
int sb_cgroup_setup(struct ah_sandbox *sb, ah_err *err);
int sb_cgroup_join_self(const sb_plan *p);   /* in the keeper (v1) */
int sb_cgroup_set_limits(struct ah_sandbox *sb, ah_err *err);
long long sb_cgroup_oom_count(const struct ah_sandbox *sb);
void sb_cgroup_teardown(struct ah_sandbox *sb);
void sb_cgroup_clear_slot(struct ah_sandbox *sb);

/* ---- rlimits.c ---- */
int sb_rlimits_apply(int nofile, int nproc, long long fsize);

/* ---- seccomp.c ---- */
int sb_seccomp_build(struct sock_fprog *out, ah_err *err);
int sb_seccomp_apply(const struct sock_fprog *prog);

/* ---- inside.c: keeper, spawner, reaper, agent ---- */
__attribute__((noreturn)) void sb_keeper_main(const sb_plan *p, int ctl_fd, int exec_fd);

/* ---- exec.c (runner side) ---- */
struct ah_sandbox_exec_spec;
struct ah_sandbox_result;
int sb_exec_run(struct ah_sandbox *sb, const struct ah_sandbox_exec_spec *x,
                struct ah_sandbox_result *out, ah_err *err);

/* ---- sandbox.c ---- */
/* A fresh unclaimed sandbox; disk_bytes 0: the configured size. */
int sb_build(struct ah_sandbox **out, long long disk_bytes, ah_err *err);
void sb_teardown(struct ah_sandbox *sb);
int sb_write_file(const char *path, const char *data);

/* ---- pool.c ---- */
int sb_pool_start(ah_err *err);
int sb_pool_take(struct ah_sandbox **out, long long disk_bytes, bool counted, ah_err *err);
void sb_pool_retire(struct ah_sandbox *sb);   /* torn down by the pool thread */
void sb_pool_stop(void);

#endif
