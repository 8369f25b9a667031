/* Sandboxes: run a stranger's Node.js program isolated from the host.
 *
 * A sandbox is a set of fresh namespaces (user, pid, mount, ipc, uts, cgroup)
 * and a network namespace of its own (reused by its slot's next sandbox only
 * while it holds no socket at all), with its own cgroup limits (memory, cpu,
 * pids), a root filesystem that
 * shows only read-only /usr (+ the /bin, /lib* links), a curated /etc, a minimal
 * /dev, private /proc and /tmp, and /app: the agent's image as the lower layer
 * of an overlayfs whose upper layer lives on the sandbox's own size-capped disk,
 * and /files (agent/ and session/, the agent's, on that disk too) where the
 * runner puts managed files and collects session outputs (runner/run_files.c).
 * Its network namespace reaches the internet through NAT only (no host, no
 * private ranges, no link-local, exactly the configured DNS resolvers), or,
 * with an egress allow-list in its spec, only what the list names (egress.c).
 *
 * Programs run as an unprivileged user (uid 1000 inside, an unprivileged host
 * uid outside) with no_new_privs, no capabilities and a seccomp filter: an
 * allow list of what node, npm and the shell use (seccomp.c), EPERM for the rest.
 *
 * /usr is the host's: node and npm are the host's own, not an image per agent.
 * It is a recursive bind of the host's /usr (its submounts, e.g. a separate
 * /usr/local, included) made read-only, nosuid and nodev on every mount of
 * the tree; the host's /bin, /sbin, /lib* appear as the same links into it
 * (or as such binds where they are directories). So a program can read the
 * host's binaries, libraries and /usr/share: only what any local user can
 * read (host root's files are nobody's inside; "other" permissions apply) and
 * no secrets by convention: configuration and data live in /etc, /var, /home,
 * which the sandbox does not see (its /etc is curated). It must never be
 * writable (one agent would change every agent's node), nor honour setuid
 * (su, passwd and the like run without privilege; no_new_privs as well), nor
 * hold devices. The sandbox cannot change those flags: the mounts belong to
 * the keeper's namespace, the program has no capabilities, and seccomp refuses
 * the mount calls. Operators: whatever is installed under /usr (also
 * /usr/local, global npm packages) is readable by every agent.
 * Sandboxes are pre-made by a background pool so that create + exec costs about
 * one fork/exec more than running node directly.
 *
 * Thread safety: init/shutdown once per process; create/destroy from any thread;
 * exec on one sandbox is serialized by the caller (one exec at a time per
 * sandbox), execs on different sandboxes may run concurrently.
 *
 * Config keys (core/config_keys.h, which tests/unit/test_config.c checks this
 * list against; AGENTHOST_<KEY> overrides):
 *   sandbox_root           var/data/sandboxes   state: disk images, mount points
 *   sandbox_memory_mb      2048     memory cap (cgroup); OOM kills inside only
 *   sandbox_cpus           2        cpu quota in cpus (cfs quota / cpu.max)
 *   sandbox_pids           256      pids cap (cgroup pids.max and RLIMIT_NPROC)
 *   sandbox_nofile         1024     RLIMIT_NOFILE of programs in the sandbox
 *   sandbox_disk_mb        10240    writable layer (+ /tmp) size cap (sparse ext4 on a
 *                                   loop device); 0: a 1 GiB tmpfs instead
 *   sandbox_pool_size      2        pre-made sandboxes kept ready
 *   sandbox_pool_max       16       after a burst the pool keeps as many ready as
 *                                   were in use at once (for a minute), up to this
 *   sandbox_uid_base       1000000  host uid of slot 0's root; each slot has 65536 ids
 *   sandbox_max            256      slots: sandboxes alive at once on the host
 *   sandbox_memory_budget_mb  (host RAM - max(2 GiB, 25%))  memory caps of all live
 *                                   sandboxes together (pool and spares included) and
 *                                   the limit of their cgroup parent; beyond it create
 *                                   fails with AH_EBUSY (budget.c)
 *   disk_reserve_mb        (max(1 GiB, 5%))  free space kept on sandbox_root's
 *                                   filesystem: create fails with AH_EBUSY unless the
 *                                   free space covers what live disks may still
 *                                   write, the new disk, and this
 *   sandbox_cgroup         agenthost  the cgroup parent of all sandboxes; the budget
 *                                   counts the sandboxes under it, host-wide
 *   sandbox_net            10.254   first two octets of the /16 used for veth /30s
 *   sandbox_dns            (empty)  resolver(s) to allow, comma separated;
 *                                   empty: the nameservers of /etc/resolv.conf
 *   sandbox_allow_loopback_egress  0  tests only: sandboxes may reach the host's
 *                                   own addresses (e.g. a mock provider)
 *   egress_allow_private   0        agents' allow-lists may open loopback, private and
 *                                   reserved ranges (link-local never)
 *   sandbox_keeper         (empty)  path of agenthost-keeper, the program each
 *                                   sandbox runs as its PID 1; empty: next to
 *                                   this program, else the build tree's, else
 *                                   libexec/agenthost (an install)
 */
#ifndef AH_SANDBOX_SANDBOX_H
#define AH_SANDBOX_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/config.h"
#include "core/egress.h"
#include "core/err.h"

typedef struct ah_sandbox ah_sandbox;

/* A directory of the host shown at path inside (a bucket's FUSE mount, see
 * lib/runner/fuse.c). The keeper gets a detached copy of its mount
 * (open_tree), never a host path; read_only is a flag of that copy, which
 * the sandbox cannot change (no capabilities, seccomp refuses mount calls). */
typedef struct ah_sandbox_bind {
	const char *host_dir;   /* a mount point of the runner's */
	const char *path;       /* absolute, normalised, < 256 bytes; created on the root */
	bool read_only;
} ah_sandbox_bind;

/* An egress allow-list (issue 32, egress.c): the sandbox reaches only
 * these networks and names (resolved when it is made, pinned for its life)
 * and its own loopback; private ranges only with egress_allow_private. */
typedef struct ah_sandbox_egress {
	size_t n;
	ah_egress_entry entries[AH_EGRESS_MAX_ENTRIES];
} ah_sandbox_egress;

typedef struct ah_sandbox_spec {
	/* Read-only lower layer shown at /app (overlay with the sandbox's own
	 * upper layer). The directory is never modified. */
	const char *image_dir;
	/* A deploy's build (npm install): torn down at once by destroy, because
	 * its caller removes the source tree (image_dir) right after. What the
	 * build writes stays in its own upper layer on its own capped disk, like
	 * a run's; the deploy pipeline reads the result out as a tar stream. */
	bool build;
	/* 0: the config's value. */
	long long memory_bytes, disk_bytes;
	int cpus, pids_max, nofile;
	/* Made ahead of a call that has not come yet (a runner's spare): the
	 * pool, which grows to the calls it sees at once, does not count it. */
	bool ahead;
	/* Bound in after /app, in order. */
	const ah_sandbox_bind *binds;
	size_t nbinds;
	/* NULL: the open network (NAT to anything but the refused ranges). */
	const ah_sandbox_egress *egress;
} ah_sandbox_spec;

#define AH_SANDBOX_CANCEL_GRACE_MS 5000 /* SIGTERM → SIGKILL for a cancelled program */
/* What one exec takes: argv and envp (each string and its NUL) in bytes, and
 * the count of each. The API caps an agent's secrets below these. */
#define AH_SANDBOX_EXEC_BYTES_MAX (256 * 1024)
#define AH_SANDBOX_EXEC_ARGS_MAX 1024

typedef struct ah_sandbox_exec_spec {
	const char *const *argv;   /* argv[0] is looked up as given (use /usr/bin/node) */
	const char *const *envp;   /* the WHOLE environment: nothing of the host's leaks */
	const void *stdin_data;
	size_t stdin_len;
	/* Instead of stdin_data: stdin_len bytes of this file from offset 0,
	 * spliced into the program's stdin, never through the caller's memory
	 * (a tar of attachments, lib/runner/run_files.c). */
	bool stdin_from_fd;
	int stdin_fd;
	int timeout_ms;            /* <= 0: no timeout */
	size_t max_output;         /* stdout cap; exceeding kills the process tree */
	const char *log_tag;       /* stderr lines are logged prefixed with it */
	const char *cwd;           /* NULL: /app */
	/* stdout into this file instead of out (still capped by max_output,
	 * output_truncated when it was): for output too large for memory. */
	bool stdout_to_fd;
	int stdout_fd;
	/* Optional: every chunk of stdout and stderr as it arrives, in order
	 * (a build's output recorded while it runs); called on the exec's thread. */
	void (*on_output)(void *ctx, const char *data, size_t len);
	void *output_ctx;
	/* Optional: stdout alone as it arrives, in order, only the bytes within
	 * max_output (a streamed invocation, issue 28); on the exec's thread. */
	void (*on_stdout)(void *ctx, const char *data, size_t len);
	void *stdout_ctx;
	/* Optional: becomes non-zero (from another thread) to stop the program:
	 * SIGTERM to it, SIGKILL to its tree AH_SANDBOX_CANCEL_GRACE_MS later
	 * (POST …/cancel, issue 28); the result's cancelled then says so. */
	const volatile int *cancel;
	/* Invocation logs (#29): these values are replaced by "[redacted]" in
	 * stderr before anything of it is logged or kept, and the last
	 * keep_stderr bytes of the result are kept in err_log (0: none). */
	const char *const *redact;
	size_t nredact, keep_stderr;
	/* No exec follows in this sandbox (it is destroyed next): the spawner
	 * makes no pre-made process for a next one (issue 31). */
	bool last;
} ah_sandbox_exec_spec;

typedef struct ah_sandbox_result {
	int exit_code;             /* -1 when killed by a signal */
	int signal;                /* e.g. 9 when killed (timeout, OOM, output cap) */
	bool timed_out, oom_killed, output_truncated;
	bool cancelled;            /* stopped through the spec's cancel */
	char *out;                 /* malloc'ed stdout (NUL-terminated), caller frees */
	size_t out_len;
	char *err_tail;            /* malloc'ed last ~4 KiB of stderr, or NULL */
	char *err_log;             /* malloc'ed last keep_stderr bytes, redacted, or NULL */
	size_t err_log_len;
	bool err_log_truncated;    /* stderr was longer than err_log */
	long long duration_ms;
	/* Its phases (issue 31), in microseconds: the start (pipes made and the
	 * spawner told to exec, or a held program handed its stdin) and the
	 * run (from there to its end and its output read; the program's own
	 * start-up, node's included, counts here). */
	long long start_us, run_us;
	bool premade;              /* it ran on the spawner's pre-made process */
} ah_sandbox_result;

/* Once per process, as root: checks cgroups (v1 or v2), installs the network
 * policy (nft table "agenthost", shared by the runner processes of a host),
 * enables IPv4 forwarding and starts the pool. Slots are host-wide (lock files
 * in /run/agenthost-sandbox), so several processes may use sandboxes at once.
 * set: the sandbox_* keys (ah_settings_of(cfg)->sandbox). */
int ah_sandbox_init(const ah_sandbox_settings *set, ah_err *err);

/* A sandbox ready for exec, usually taken from the pool. AH_EBUSY: the
 * host is at its sandbox memory or disk budget (try again later). */
int ah_sandbox_create(ah_sandbox **out, const ah_sandbox_spec *spec, ah_err *err);

/* Runs argv in the sandbox with stdin_data as its stdin; may be called many
 * times on one sandbox (sessions: files in /app and /tmp persist). All processes
 * the program started are killed when it exits. Returns 0 when the program ran
 * (whatever its exit status; see out), AH_EINVALID/AH_ETOOBIG for bad specs,
 * AH_EFAIL when the sandbox itself broke (destroy it). */
int ah_sandbox_exec(ah_sandbox *sb, const ah_sandbox_exec_spec *x,
                    ah_sandbox_result *out, ah_err *err);

/* A program started ahead of its call (warm agents): ah_sandbox_exec_start
 * runs x (its stdin, timeout and output cap are ignored) with its stdin held
 * open and empty, so it runs up to where it reads its input and waits there;
 * ah_sandbox_exec_finish later gives it x's stdin and runs the rest exactly
 * as ah_sandbox_exec would (the timeout, the duration and the output cap
 * count from the finish; what it wrote before is part of out). One program
 * per sandbox: ah_sandbox_exec on a sandbox holding one cancels it first.
 * waiting: one is held and has not ended (a dead one must be cancelled, never
 * finished: it would read as the call's failure). cancel kills it and logs its
 * stderr under log_tag; AH_EFAIL when the sandbox broke. */
int ah_sandbox_exec_start(ah_sandbox *sb, const ah_sandbox_exec_spec *x, ah_err *err);
bool ah_sandbox_exec_waiting(const ah_sandbox *sb);
/* The held program has reached its read of stdin (its start-up is over): a
 * process of the sandbox blocks reading the held pipe, or watches it in an
 * epoll set (seen in /proc). */
bool ah_sandbox_exec_reading(const ah_sandbox *sb);
int ah_sandbox_exec_finish(ah_sandbox *sb, const ah_sandbox_exec_spec *x, ah_sandbox_result *out,
                           ah_err *err);
int ah_sandbox_exec_cancel(ah_sandbox *sb, const char *log_tag);

/* Frees out->out, out->err_tail and out->err_log. */
void ah_sandbox_result_free(ah_sandbox_result *r);

/* "sbx_" + 22 base62 characters. */
const char *ah_sandbox_id(const ah_sandbox *sb);
/* The sandbox's PID 1 (its keeper), as the host sees it: /proc/<pid>/root is
 * the sandbox's root. Read only through openat2(RESOLVE_IN_ROOT |
 * RESOLVE_NO_SYMLINKS): the agent owns what is in there. */
pid_t ah_sandbox_pid(const ah_sandbox *sb);

/* A TCP socket listening on 127.0.0.1:port inside the sandbox's network
 * namespace, owned by the caller (close it before the sandbox is released: a
 * socket left in the namespace keeps the slot from reusing it). Only programs
 * of this sandbox can connect to it; a port below 1024 cannot be taken by
 * them first (they have no capability in that namespace). */
int ah_sandbox_listen_loopback(const ah_sandbox *sb, int port, int *out, ah_err *err);

/* Kills every process of the sandbox and releases everything it holds: mounts,
 * cgroups, veth, loop device, disk file. NULL is a no-op. */
void ah_sandbox_destroy(ah_sandbox *sb);

/* A sandbox slot's network namespace lent to the runner itself, for a
 * connection it makes on a user's behalf to a host the user named (a git
 * clone): it reaches exactly what a sandbox reaches, the outside through NAT
 * and the configured resolvers. Join it with setns(ah_sandbox_net_fd(n),
 * CLONE_NEWNET) in a child process; resolv.conf text for those resolvers is
 * ah_sandbox_net_resolv(). The slot is taken until ah_sandbox_net_return. */
typedef struct ah_sandbox_net ah_sandbox_net;
int ah_sandbox_net_borrow(ah_sandbox_net **out, ah_err *err);
int ah_sandbox_net_fd(const ah_sandbox_net *n);
const char *ah_sandbox_net_resolv(void);
/* NULL is a no-op. */
void ah_sandbox_net_return(ah_sandbox_net *n);

/* Stops the pool, destroys pooled sandboxes, removes the network policy. */
void ah_sandbox_shutdown(void);

/* The call that took sb is over, though sb may be destroyed only later:
 * the pool, which grows to the calls it sees at once, stops counting it. */
void ah_sandbox_done(const ah_sandbox *sb);

/* The calling thread's work is background (on: SCHED_IDLE, off: back to
 * normal): sandbox teardowns and builds nobody waits for. */
void ah_sandbox_background(bool on);

/* Waits until no program has started or ended in this process's sandboxes
 * for 10 ms (a next call often follows an answer within a few ms), 250 ms at
 * most. Background work waits for such a moment: building and tearing down
 * sandboxes loads the kernel (namespaces, mounts, RCU) and holds its locks,
 * which on a small host slowed the programs running then by milliseconds. The
 * pool's refills wait the same way. */
void ah_sandbox_wait_quiet(void);

#endif
