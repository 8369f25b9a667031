/* Seccomp: the system calls a sandboxed program may make.
 *
 * An allow list, in the spirit of container runtimes' default profiles: the
 * calls node, npm, the shell and the usual build tools make (files, memory,
 * processes and threads, signals, time, events, sockets, SysV IPC in the
 * sandbox's own IPC namespace), traced from node and npm install and widened
 * to whole families. Everything else answers EPERM: mount and namespace
 * changes, tracing other processes, modules, kexec, bpf, perf, the keyring,
 * userfaultfd, handle-based opens, clock, swap, quota and NUMA administration,
 * the calls nobody here makes (modify_ldt, vmsplice, ...). Some allowed calls
 * are narrowed by argument: clone without namespace flags, socket in the
 * families a network program uses, ioctl without the terminal injection
 * requests, personality only as a query or the default. socket's family and
 * protocol are compared on the whole register: high bits set mean refused.
 *
 * ENOSYS instead of EPERM where a caller takes ENOSYS for "this kernel lacks
 * it" and falls back: clone3 (glibc then uses clone, whose flags a filter can
 * inspect), io_uring (libuv uses its thread pool), and every call newer than
 * the libseccomp this is built with (a prefix ahead of libseccomp's program),
 * so a newer libc on the host degrades as it would on an older kernel.
 *
 * Foreign architectures (i386, x32 syscall numbers) kill the process: the
 * numbers below are x86-64's. The filter is compiled once at init by
 * libseccomp as a binary tree on the syscall number, sent to each keeper with
 * GO and loaded with a plain prctl in each program, after no_new_privs
 * (inside.c). */
#include "sandbox/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>

static const char *const ALLOW[] = {
	/* files and directories */
	"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
	"preadv2", "pwritev2", "open", "openat", "openat2", "creat", "close", "close_range",
	"lseek", "dup", "dup2", "dup3", "fcntl", "flock", "fsync", "fdatasync", "sync",
	"syncfs", "sync_file_range", "truncate", "ftruncate", "fallocate", "fadvise64",
	"readahead", "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs",
	"access", "faccessat", "faccessat2", "getdents", "getdents64", "getcwd", "chdir",
	"fchdir", "mkdir", "mkdirat", "rmdir", "rename", "renameat", "renameat2", "link",
	"linkat", "unlink", "unlinkat", "symlink", "symlinkat", "readlink", "readlinkat",
	"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "umask",
	"utime", "utimes", "utimensat", "futimesat", "mknod", "mknodat", "sendfile",
	"copy_file_range", "splice", "tee", "getxattr", "lgetxattr", "fgetxattr",
	"listxattr", "llistxattr", "flistxattr", "setxattr", "lsetxattr", "fsetxattr",
	"removexattr", "lremovexattr", "fremovexattr", "inotify_init", "inotify_init1",
	"inotify_add_watch", "inotify_rm_watch", "memfd_create", "ioctl", /* see the prefix */
	/* memory */
	"brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "msync", "mincore",
	"mlock", "mlock2", "munlock", "mlockall", "munlockall", "membarrier",
	"pkey_alloc", "pkey_free", "pkey_mprotect",
	/* processes, threads, credentials, limits */
	"fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid",
	"kill", "tkill", "tgkill", "pidfd_open", "pidfd_send_signal", "getpid", "getppid",
	"gettid", "getpgid", "getpgrp", "setpgid", "getsid", "setsid", "set_tid_address",
	"set_robust_list", "get_robust_list", "futex", "futex_waitv", "rseq", "arch_prctl",
	"prctl", "seccomp", "sched_yield", "sched_getaffinity", "sched_setaffinity",
	"sched_getparam", "sched_setparam", "sched_getscheduler", "sched_setscheduler",
	"sched_getattr", "sched_setattr", "sched_get_priority_max",
	"sched_get_priority_min", "sched_rr_get_interval", "getpriority", "setpriority",
	"ioprio_get", "ioprio_set", "getrlimit", "setrlimit", "prlimit64", "getrusage",
	"times", "uname", "sysinfo", "getcpu", "getrandom", "capget", "capset", "getuid",
	"geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "setuid",
	"setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
	"setfsuid", "setfsgid", "restart_syscall",
	/* signals and time */
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigsuspend",
	"rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack",
	"signalfd", "signalfd4", "pause", "alarm", "getitimer", "setitimer",
	"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday",
	"time", "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun",
	"timer_delete", "timerfd_create", "timerfd_settime", "timerfd_gettime",
	/* events, pipes, IPC (the sandbox has its own IPC namespace) */
	"epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
	"epoll_pwait2", "poll", "ppoll", "select", "pselect6", "eventfd", "eventfd2",
	"pipe", "pipe2", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop",
	"semtimedop", "semctl", "shmget", "shmat", "shmdt", "shmctl", "mq_open",
	"mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
	/* sockets (socket itself: see add_socket_rules) */
	"socketpair", "bind", "listen", "accept", "accept4", "connect", "getsockname",
	"getpeername", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
	"shutdown", "setsockopt", "getsockopt",
};

/* Absent from this kernel as far as the caller can tell: it falls back. */
static const char *const ABSENT[] = {
	"clone3", "io_uring_setup", "io_uring_enter", "io_uring_register",
};

static int add_list(scmp_filter_ctx ctx, uint32_t action, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int nr = seccomp_syscall_resolve_name(names[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		if (seccomp_rule_add(ctx, action, nr, 0) < 0)
			return -1;
	}
	return 0;
}

#define NS_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | \
                  CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_NEWTIME)

/* personality: a query (0xffffffff) or PER_LINUX; no flag that changes what
 * an exec'd program inherits (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, ...). The
 * kernel reads an unsigned int: glibc's personality(-1) sets the upper half. */
static const unsigned long PERSONALITY_OK[] = { 0xffffffffUL, 0 };

static int add_arg_rules(scmp_filter_ctx ctx)
{
	if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
	                     SCMP_A0(SCMP_CMP_MASKED_EQ, NS_FLAGS, 0)) < 0)
		return -1;
	for (size_t i = 0; i < sizeof PERSONALITY_OK / sizeof PERSONALITY_OK[0]; i++)
		if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
		                     SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL, PERSONALITY_OK[i])) < 0)
			return -1;
	return 0;
}

/* socket: unix, IPv4, IPv6, and netlink's routing protocol (how getifaddrs,
 * i.e. os.networkInterfaces, lists addresses). Not packet, vsock, alg, the
 * other netlink protocols nor the rarely used families with their history
 * of kernel bugs. */
static int add_socket_rules(scmp_filter_ctx ctx)
{
	static const int families[] = { AF_UNIX, AF_INET, AF_INET6 };
	for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
		if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
		                     SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)families[i])) < 0)
			return -1;
	return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2,
	                        SCMP_A0(SCMP_CMP_EQ, AF_NETLINK), SCMP_A2(SCMP_CMP_EQ, NETLINK_ROUTE));
}

/* Exports the compiled BPF through a memfd into a malloc'ed program, with
 * room for `room` instructions ahead of it. */
static int export_bpf(scmp_filter_ctx ctx, size_t room, struct sock_fprog *out)
{
	int fd = memfd_create("seccomp", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = -1;
	if (seccomp_export_bpf(ctx, fd) < 0)
		goto done;
	off_t len = lseek(fd, 0, SEEK_END);
	if (len <= 0 || len % sizeof(struct sock_filter))
		goto done;
	size_t n = (size_t)len / sizeof(struct sock_filter);
	struct sock_filter *f = calloc(room + n, sizeof *f);
	if (!f || pread(fd, f + room, (size_t)len, 0) != len) {
		free(f);
		goto done;
	}
	out->filter = f;
	out->len = (unsigned short)(room + n);
	rc = 0;
done:
	close(fd);
	return rc;
}

/* The first number past the newest x86-64 call libseccomp knows. */
static int first_unknown_nr(void)
{
	int last = 0;
	for (int nr = 0; nr < 1024; nr++) {
		char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr);
		if (name)
			last = nr;
		free(name);
	}
	return last + 1;
}

/* Ahead of libseccomp's program, what it cannot say:
 * - x86-64 numbers from `first` up (below the x32 bit) answer ENOSYS;
 * - ioctl answers EPERM to pushing input into a terminal (TIOCSTI: the
 *   agent's own or one passed to it) and to the console multiplexer
 *   (TIOCLINUX). The request is an unsigned int: only the low half of the
 *   register counts (little-endian: the first word of args[1]). libseccomp
 *   lets an unconditional allow win over any refusal by argument.
 * Anything else falls through to the program, which checks the architecture
 * itself. Classic BPF jumps are relative: the program needs no change for
 * being moved. */
enum { PREFIX_LEN = 11 };
#define TO_PROGRAM(i) (PREFIX_LEN - (i) - 1) /* jump offset from instruction i */

static void write_prefix(struct sock_filter *f, int first)
{
	const struct sock_filter prefix[PREFIX_LEN] = {
		/* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		/* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, TO_PROGRAM(1)),
		/* 2 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		/* 3 */ BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, TO_PROGRAM(3), 0), /* x32 */
		/* 4 */ BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (unsigned)first, 0, 1),
		/* 5 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		/* 6 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, TO_PROGRAM(6)),
		/* 7 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		/* 8 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 1, 0),
		/* 9 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX, 0, TO_PROGRAM(9)),
		/* 10 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	};
	memcpy(f, prefix, sizeof prefix);
}

static int add_rules(scmp_filter_ctx ctx)
{
	/* A binary tree on the number instead of a list: a call near the end
	 * of the list would otherwise be compared with every one before it. */
	if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0 ||
	    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2) < 0)
		return -1;
	if (add_list(ctx, SCMP_ACT_ALLOW, ALLOW, sizeof ALLOW / sizeof ALLOW[0]) < 0 ||
	    add_list(ctx, SCMP_ACT_ERRNO(ENOSYS), ABSENT, sizeof ABSENT / sizeof ABSENT[0]) < 0)
		return -1;
	return add_arg_rules(ctx) < 0 || add_socket_rules(ctx) < 0 ? -1 : 0;
}

int sb_seccomp_build(struct sock_fprog *out, ah_err *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!ctx)
		return ah_err_set(err, AH_EFAIL, "seccomp_init failed");
	int rc = AH_EFAIL;
	if (add_rules(ctx) < 0) {
		ah_err_set(err, AH_EFAIL, "seccomp rules failed");
		goto done;
	}
	if (export_bpf(ctx, PREFIX_LEN, out) < 0) {
		ah_err_set(err, AH_EFAIL, "seccomp export failed");
		goto done;
	}
	write_prefix(out->filter, first_unknown_nr());
	if (out->len > SB_SECCOMP_MAX) { /* it travels to each keeper in GO */
		ah_err_set(err, AH_EFAIL, "seccomp filter of %u instructions (at most %d)", out->len,
		           SB_SECCOMP_MAX);
		free(out->filter);
		out->filter = NULL;
		goto done;
	}
	rc = 0;
done:
	seccomp_release(ctx);
	return rc;
}
