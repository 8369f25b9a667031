/* Seccomp: the system calls a sandboxed program may not make.
 *
 * A deny list (default allow) of the calls that reach kernel attack surface a
 * Node.js program never needs or that would undo the other layers: mount and
 * namespace changes, tracing other processes, kernel modules, kexec, bpf, the
 * keyring, perf, userfaultfd, handles that bypass path checks, clock and swap
 * administration. clone with namespace flags is refused; clone3 answers ENOSYS
 * so libc falls back to clone, whose flags a filter can inspect. Foreign
 * architectures (i386, x32 syscall numbers) kill the process: the deny list
 * only names x86-64 numbers. The filter is compiled once at init by libseccomp,
 * sent to each keeper with GO and loaded with a plain prctl in each program,
 * after no_new_privs (inside.c). */
#include "sandbox/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/seccomp.h>

static const char *const DENY[] = {
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
	"fsconfig", "fsmount", "fspick", "mount_setattr", "setns", "unshare",
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
	"kexec_load", "kexec_file_load", "reboot", "init_module", "finit_module",
	"delete_module", "bpf", "perf_event_open", "keyctl", "add_key", "request_key",
	"userfaultfd", "open_by_handle_at", "name_to_handle_at", "swapon", "swapoff",
	"acct", "quotactl", "quotactl_fd", "lookup_dcookie", "iopl", "ioperm",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "syslog",
	"vhangup", "uselib", "_sysctl", "sysfs", "personality", "fanotify_init",
	"io_uring_setup", "io_uring_enter", "io_uring_register", "nfsservctl",
	"mbind", "migrate_pages", "move_pages", "set_mempolicy", "landlock_create_ruleset",
};

static int add_rules(scmp_filter_ctx ctx)
{
	for (size_t i = 0; i < sizeof DENY / sizeof DENY[0]; i++) {
		int nr = seccomp_syscall_resolve_name(DENY[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0) < 0)
			return -1;
	}
	return 0;
}

/* clone: EPERM when any namespace flag is set. libseccomp cannot say "any bit
 * of a mask is set" in one rule, so one rule per flag. */
static int add_clone_rules(scmp_filter_ctx ctx)
{
	static const unsigned long flags[] = { CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID,
		CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME };
	for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
		if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
		                     SCMP_A0(SCMP_CMP_MASKED_EQ, flags[i], flags[i])) < 0)
			return -1;
	return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
}

/* Exports the compiled BPF through a memfd into a malloc'ed program. */
static int export_bpf(scmp_filter_ctx ctx, struct sock_fprog *out)
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
	struct sock_filter *f = malloc((size_t)len);
	if (!f || pread(fd, f, (size_t)len, 0) != len) {
		free(f);
		goto done;
	}
	out->filter = f;
	out->len = (unsigned short)(len / sizeof(struct sock_filter));
	rc = 0;
done:
	close(fd);
	return rc;
}

int sb_seccomp_build(struct sock_fprog *out, ah_err *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return ah_err_set(err, AH_EFAIL, "seccomp_init failed");
	int rc = AH_EFAIL;
	/* A binary tree instead of a list: every allowed call would otherwise
	 * be compared with each denied one first. */
	if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0 ||
	    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2) < 0 ||
	    add_rules(ctx) < 0 || add_clone_rules(ctx) < 0) {
		ah_err_set(err, AH_EFAIL, "seccomp rules failed");
		goto done;
	}
	if (export_bpf(ctx, out) < 0) {
		ah_err_set(err, AH_EFAIL, "seccomp export failed");
		goto done;
	}
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
