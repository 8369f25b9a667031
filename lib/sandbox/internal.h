/* Internals shared by the sandbox's files: the plan (what one sandbox needs,
 * computed once), the sandbox record, the wire format between the runner and the
 * processes inside, and one set-up/tear-down pair per isolation concern.
 *
 * Processes: the runner starts the *keeper* (PID 1 of the sandbox's pid
 * namespace, still real root, in new mount/ipc/uts/cgroup namespaces and the
 * slot's network namespace; it builds the root filesystem and later mounts
 * /app, and never runs sandboxed code). The keeper is its own small program,
 * agenthost-keeper (inside.c and what it calls), exec'd straight from a
 * vfork-style clone: a fork of the runner would copy the page tables of the
 * runner's whole address space and tear them down again, per sandbox and again
 * for the spawner, and make the runner's own writes fault for as long as the
 * copies live. The keeper's settings (plan, resolv.conf, seccomp filter) come
 * with GO. The keeper forks the *spawner*, which moves into a new user
 * namespace where root is an unprivileged host uid. For each exec the spawner clones a
 * *reaper* into a new pid namespace, and the reaper forks the *agent*, which
 * drops to uid 1000, no_new_privs, seccomp, and execs. When the agent exits the
 * reaper exits, and the kernel kills whatever the agent left behind. Between
 * execs the spawner keeps the next reaper and agent made, the agent dropped and
 * filtered already, waiting for its request (premade.c); the path above is the
 * fallback when none is ready.
 *
 * The keeper's processes are raw clones and share memory with each other at
 * times (see inside.c): they make system calls and use stack or static
 * buffers only. */
#ifndef AH_SANDBOX_INTERNAL_H
#define AH_SANDBOX_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/filter.h>

#include "core/err.h"
#include "sandbox/sandbox.h"

#define SB_AGENT_UID   1000u      /* uid/gid of programs inside */
#define SB_IDS_PER_SLOT 65536u
#define SB_MAX_NS      4          /* DNS resolvers kept */
#define SB_MSG_MAX     AH_SANDBOX_EXEC_BYTES_MAX
#define SB_SECCOMP_MAX 512        /* BPF instructions of the filter */

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
	int disk_fd;                 /* the disk file, read-only (budget.c stats it); -1 */
} sb_plan;

/* Where one controller lives: the parent of the slots in its v1 hierarchy, or
 * in the unified (v2) tree. */
typedef struct sb_cg_dir {
	char path[256];              /* mount + own cgroup + /<sandbox_cgroup> */
	bool v2;
} sb_cg_dir;

/* What the keeper needs beyond the plan, sent as GO's body: the keeper is
 * exec'd and shares nothing else with the runner. */
typedef struct sb_keeper_conf {
	sb_plan plan;
	char resolv[512];
	char cg_join[3][400];        /* files the keeper writes 0 to, to join its cgroups */
	unsigned short seccomp_len;
	struct sock_filter seccomp[SB_SECCOMP_MAX];
} sb_keeper_conf;

/* Process-wide state set by ah_sandbox_init. */
typedef struct sb_global {
	char root[256];              /* sandbox_root, absolute */
	sb_cg_dir cg[3];             /* memory, cpu, pids: each where the host has it */
	int cg_hier[3];              /* the distinct hierarchies: an index into cg each */
	int cg_nhier;
	char cg_name[64];            /* sandbox_cgroup: the parent of all slots */
	long long memory_budget;     /* bytes: the parent's limit, and admission's */
	long long disk_reserve;      /* bytes kept free on sandbox_root's filesystem */
	long long memory_bytes, disk_bytes;
	int cpus, pids_max, nofile, pool_size, pool_max, max_slots;
	unsigned uid_base;
	unsigned net_a, net_b;       /* veth addresses are net_a.net_b.x.y */
	char resolv[512];            /* resolv.conf for sandboxes */
	uint32_t dns[SB_MAX_NS];
	int ndns;
	bool allow_host;
	bool egress_private;         /* egress_allow_private: allow-lists may open private ranges */
	struct sock_fprog seccomp;   /* built once, loaded by every agent */
	int keeper_exe;              /* O_PATH fd of agenthost-keeper */
} sb_global;

extern sb_global sb_g;

struct ah_sandbox {
	sb_plan plan;
	pid_t keeper;
	int keeper_pidfd;
	int ctl_fd;                  /* runner end of the keeper's socket */
	int exec_fd;                 /* runner end of the spawner's socket */
	int nsteps_done;             /* host steps set up, torn down in reverse */
	bool claimed, broken;
	long long oom_kills;         /* the cgroup's count after the last exec; -1: not read yet */
	int oom_fd;                  /* its memory.oom_control (v1) or memory.events (v2), or -1 */
	bool deploy;                 /* a build: tear down synchronously */
	bool ahead;                  /* built for the pool when nobody waited (budget.c) */
	bool budget_held;            /* its commitment is in the slot's record */
	/* A program started ahead of its call (ah_sandbox_exec_start): the
	 * runner's ends of its pipes, kept until the call or the cancel. */
	struct {
		bool on;
		int fd_in, fd_out, fd_err;
		long long oom_before;
		/* The start's redact values, for its stderr logged at a cancel
		 * (a call's own finish redacts with the call's). */
		struct ah_redact *rd;
	} held;
	struct ah_sandbox *next;     /* pool list */
};

/* Wire format: SOCK_SEQPACKET, one struct per message, fds by SCM_RIGHTS. */
enum sb_op {
	SB_GO = 1,      /* runner → keeper, body sb_keeper_conf: the cgroup and disk are ready */
	SB_READY,       /* keeper → runner: sandbox built */
	SB_ERROR,       /* inside → runner: msg says what failed */
	SB_MOUNT_APP,   /* runner → keeper, fd = image dir: the overlay's lower layer */
	SB_MOUNT_BIND,  /* runner → keeper, fd = a detached mount, body = the path inside */
	SB_OK,
	SB_EXEC,        /* runner → spawner, fds stdin/stdout/stderr, body argv/envp,
	                 * arg SB_EXEC_LAST or 0 */
	SB_KILL,        /* runner → spawner: kill the running program's tree */
	SB_EXITED,      /* spawner → runner: arg = wait status, argc = 1: it ran on
	                 * the pre-made process (premade.c) */
	SB_ETC_NET,     /* runner → keeper, body = /etc/hosts, NUL, resolv.conf, NUL (egress.c) */
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

/* ---- wire.c ---- */
int sb_send(int fd, const sb_msg *m, const void *body, size_t blen, const int *fds, int nfds);
/* Lets fd send messages of SB_MSG_MAX (an exec request's argv and envp). */
int sb_fit_send_buffer(int fd);
/* Receives into m (+ body up to bcap, *blen set); fds (up to 3) into fds/nfds.
 * Returns 1 on a message, 0 on EOF, -1 on error. */
int sb_recv(int fd, sb_msg *m, void *body, size_t bcap, size_t *blen, int *fds, int *nfds);
int sb_error_reply(int fd, int err, const char *what);

/* ---- msg.c: request bodies, as the processes inside read them ---- */
#define SB_EXEC_ARGS_MAX AH_SANDBOX_EXEC_ARGS_MAX
#define SB_BIND_PATH_MAX 256
/* EXEC's body: m->argc then m->envc NUL-terminated strings → argv, envp
 * (SB_EXEC_ARGS_MAX entries each, NULL-terminated); -1 if it does not hold
 * them. Terminates m->msg (the working directory). */
int sb_exec_parse(sb_msg *m, char *body, size_t blen, char **argv, char **envp);
/* MOUNT_BIND's body: one absolute path, NUL-terminated; -1 (EINVAL) if not. */
int sb_bind_path(const char *body, size_t blen, char out[SB_BIND_PATH_MAX]);
int sb_write_file(const char *path, const char *data);

/* ---- userns.c ---- */
int sb_userns_write_maps(pid_t pid, unsigned uid_base);
int sb_userns_become_root(void);
int sb_userns_drop_to_agent(void);
int sb_userns_idmap_fd(unsigned to);

/* ---- mounts.c (keeper side) ---- */
int sb_mounts_build_root(const sb_plan *p, const char *resolv, const char **what);
int sb_mounts_app(int dirfd, const char **what);
/* Attaches the detached mount tree at path (absolute; its directories are
 * made on the read-only root, which stays read-only). */
int sb_mounts_bind(int tree, const char *path, const char **what);
/* SB_ETC_NET's body (hosts, NUL, resolv.conf, NUL) into /etc, the root
 * writable for that moment only. */
#define SB_ETC_NET_MAX (64 * 1024)
int sb_mounts_etc_net(const char *body, size_t blen, const char **what);

/* The writable disk's top-level directories (mounts.c), made in the disk
 * template already (disk.c). upper/ is chown'ed to the agent by the keeper. */
static const struct { const char *name; unsigned mode; } SB_DISK_DIRS[] = {
	{ "upper", 0755 }, { "work", 0700 }, { "lower", 0700 }, { "tmp", 01777 }, { "files", 0755 },
};

/* ---- disk.c (runner side) ---- */
int sb_disk_setup(sb_plan *p, ah_err *err);
void sb_disk_teardown(sb_plan *p);
void sb_disk_close_loop(sb_plan *p);

/* ---- netlink.c ---- */
int sb_nl_create_veth(const char *host, int peer_ns);  /* peer "eth0" in netns peer_ns */
int sb_nl_delete_link(const char *name);
int sb_nl_add_addr(int idx, uint32_t ip);
int sb_nl_link_up(int idx);
void sb_nl_disable_ipv6(const char *ifname);
int sb_net_inside_setup(const sb_plan *p, const char **what);  /* from inside the netns */
int sb_net_listen_loopback(int ns, int port, int *out, ah_err *err);

/* ---- net.c (runner side) ---- */
int sb_net_policy_install(ah_err *err);
void sb_net_policy_remove(void);
/* The slot's network namespace in *ns (-1: none yet): the one kept from the
 * slot's last sandbox while it holds no socket, else a new one with its veth
 * configured on both sides. */
int sb_net_slot_setup(const sb_plan *p, int *ns, ah_err *err);
void sb_net_slot_drop(const sb_plan *p, int *ns);
void sb_net_host_teardown(const sb_plan *p);   /* deletes a leftover veth */
/* Runs an nft script in network namespace ns (-1: the host's). */
int sb_net_nft(int ns, const char *script);
/* Adds (on) or removes veth in the host table's set of sandboxes whose
 * allow-list opens private ranges (egress_allow_private). */
int sb_net_private_ok(const char *veth, bool on);

/* ---- egress.c: allow-lists ---- */
/* Installs the allow-list in sb's namespace and its pinned names in its
 * /etc; NULL: the open network (nothing to do: reset at the network step). */
int sb_egress_claim(struct ah_sandbox *sb, const ah_sandbox_egress *eg, ah_err *err);
/* The slot's namespace back to the open network (before it is reused). */
void sb_egress_reset(struct ah_sandbox *sb);

/* ---- cgroup_place.c: the parent inside the runner's own cgroup ---- */
int sb_cgroup_init(ah_err *err);
const char *sb_cgroup_layout(void);
const char *sb_cgroup_parent(void);

/* ---- cgroup.c ---- */
int sb_cgroup_setup(struct ah_sandbox *sb, ah_err *err);
/* The file the keeper writes 0 to, to join the i-th distinct hierarchy (i < 3);
 * "" if none. */
void sb_cgroup_join_file(const sb_plan *p, int i, char *out, size_t n);
int sb_cgroup_set_limits(struct ah_sandbox *sb, ah_err *err);
long long sb_cgroup_oom_count(const struct ah_sandbox *sb);
/* The host pids of the sandbox's processes (up to max). */
int sb_cgroup_pids(const struct ah_sandbox *sb, pid_t *out, int max);
void sb_cgroup_teardown(struct ah_sandbox *sb);
void sb_cgroup_clear_slot(struct ah_sandbox *sb);

/* The parent's memory limit (budget.c). */
int sb_cgroup_set_parent_memory(long long bytes, ah_err *err);

/* ---- budget.c: host-wide memory and disk admission ---- */
int sb_budget_init(const ah_sandbox_settings *set, ah_err *err);
/* Admits sb (AH_EBUSY when the host is at its budget) and records its
 * commitment in the slot's lock file, lock_fd. */
int sb_budget_admit(struct ah_sandbox *sb, int lock_fd, ah_err *err);
/* The disk file exists now: its allocated blocks can be read. */
void sb_budget_note_disk(struct ah_sandbox *sb, int lock_fd);
void sb_budget_release(struct ah_sandbox *sb, int lock_fd);

/* ---- rlimits.c ---- */
int sb_rlimits_apply(int nofile, int nproc, long long fsize);

/* ---- seccomp.c (built in the runner, applied in inside.c) ---- */
int sb_seccomp_build(struct sock_fprog *out, ah_err *err);

/* SB_EXEC's arg: no exec follows in this sandbox (it is destroyed next), so
 * the spawner makes no pre-made process after it. */
#define SB_EXEC_LAST 1

/* The keeper's processes run on static stacks that the process before them
 * left without returning (exec, _exit): an address-sanitizer build clears the
 * redzones it left there, which it would take for the next one's overflows. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define SB_STACK_FRESH(s) ASAN_UNPOISON_MEMORY_REGION(s, sizeof(s))
#else
#define SB_STACK_FRESH(s) ((void)0)
#endif

/* ---- premade.c: the spawner's pre-made agent (used by inside.c) ---- */
typedef struct sb_pre {
	pid_t reaper;                /* -1: none ready */
	int rq;                      /* the spawner's end of the request channel */
	int status;                  /* the reaper's status pipe, read end */
} sb_pre;
/* The reaper's end: waits for agent (closing fds once SIGTERM is handled),
 * writes its wait status to status_fd, exits. */
__attribute__((noreturn)) void sb_reaper_wait(pid_t agent, int status_fd, const int *fds, int nfds);
/* Reads one message of the runner's while a program runs and passes it to
 * the reaper: SIGTERM for a cancel's SIGTERM, else SIGKILL (a KILL, the
 * runner's end, garbage). sb_recv's result: <= 0 once the runner is gone. */
int sb_forward_kill(int exec_fd, pid_t reaper);
/* A pair ready for the next request: -1 (none) on failure. */
int sb_pre_make(sb_pre *p, int exec_fd, const struct sock_fprog *filter);
/* Hands the request to p's child: 1 when it runs it (p->reaper and p->status
 * are then the run's), 0 when it did not (p discarded: run it cold). */
int sb_pre_hand_over(sb_pre *p, int exec_fd, const sb_msg *m, const char *body, size_t blen,
                     const int fds[3]);
void sb_pre_discard(sb_pre *p);

/* ---- inside.c: agenthost-keeper's main, the spawner, reaper and agent ---- */
#define SB_KEEPER_CTL_FD  3       /* the keeper's descriptors at exec */
#define SB_KEEPER_EXEC_FD 4

/* ---- exec.c (runner side) ---- */
struct ah_sandbox_exec_spec;
struct ah_sandbox_result;
int sb_exec_run(struct ah_sandbox *sb, const struct ah_sandbox_exec_spec *x,
                struct ah_sandbox_result *out, ah_err *err);
/* The halves of a run started ahead (sandbox.h: ah_sandbox_exec_start). */
int sb_exec_begin(struct ah_sandbox *sb, const struct ah_sandbox_exec_spec *x, ah_err *err);
int sb_exec_finish(struct ah_sandbox *sb, const struct ah_sandbox_exec_spec *x,
                   struct ah_sandbox_result *out, ah_err *err);
bool sb_exec_held_alive(const struct ah_sandbox *sb);
bool sb_exec_held_reading(const struct ah_sandbox *sb);
/* Kills the held program (if it still runs) and waits for its end; logs what
 * it wrote to stderr under tag. -1 when the spawner did not answer. */
int sb_exec_cancel(struct ah_sandbox *sb, const char *tag);
/* Closes the held pipes (the sandbox is being destroyed). */
void sb_exec_held_close(struct ah_sandbox *sb);
/* 0 when no program has started or ended for SB_QUIET_SETTLE_MS, else how
 * long to wait before asking again. */
long long sb_exec_quiet_in_ms(void);
long long sb_mono_ms(void);                  /* CLOCK_MONOTONIC */
#define SB_QUIET_SETTLE_MS 10     /* see ah_sandbox_wait_quiet */
#define SB_QUIET_MAX_MS 250

/* ---- slots.c: what a live sandbox holds host-wide (lock file, uids) ---- */
#define SB_LOCK_DIR "/run/agenthost-sandbox"
typedef struct sb_slot {
	bool used;       /* a sandbox has it */
	int lock;        /* the flock'ed lock file while we hold the slot, else -1 */
	int idmap;       /* user namespace for /app's idmapped mount, or -1 */
	int netns;       /* network namespace, configured, or -1 */
	bool egress;     /* its namespace may hold an allow-list (egress.c) */
	bool private_ok; /* its veth is in the host table's private_ok set */
} sb_slot;
void sb_slots_init(void);
void sb_slots_sweep(void);     /* at init: clears what dead owners left */
void sb_slots_let_go(void);    /* at shutdown: the slots held for reuse */
int sb_slot_take(struct ah_sandbox *sb, ah_err *err);
void sb_slot_release(struct ah_sandbox *sb);
sb_slot *sb_slot_of(const struct ah_sandbox *sb);   /* the slot sb holds */

/* ---- steps.c: building and tearing down ---- */
/* A fresh unclaimed sandbox; disk_bytes 0: the configured size.
 * ahead: nobody waits for it (a pool refill): the budget keeps room for one
 * more sandbox past it. */
int sb_build(struct ah_sandbox **out, long long disk_bytes, bool ahead, ah_err *err);
/* Gives sb's budget back now (its processes are being killed). */
void sb_release_budget(struct ah_sandbox *sb);
void sb_teardown(struct ah_sandbox *sb);
/* The slot's network namespace, made or reused (a step; also lent alone). */
int sb_net_setup(struct ah_sandbox *sb, ah_err *err);
/* The keeper's answer: want (SB_OK, SB_READY) within timeout_ms, else AH_EFAIL. */
int sb_keeper_reply(struct ah_sandbox *sb, int want, int timeout_ms, ah_err *err);
/* The keeper is gone: AH_EFAIL with what it said last. */
int sb_keeper_died(struct ah_sandbox *sb, ah_err *err);

/* ---- pool.c ---- */
int sb_pool_start(ah_err *err);
int sb_pool_take(struct ah_sandbox **out, long long disk_bytes, bool counted, ah_err *err);
void sb_pool_retire(struct ah_sandbox *sb);   /* torn down by the pool thread */
void sb_pool_stop(void);

#endif
