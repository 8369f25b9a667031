/* Test probe run inside a sandbox: tries what a hostile program would try and
 * prints one "name=result" line per attempt (result: ok or the errno name).
 * Built by conftest.py into the test image. Usage: probe syscalls | forkbomb |
 * nofile | allowlist */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void report(const char *name, long rc)
{
	printf("%s=%s\n", name, rc < 0 ? strerrorname_np(errno) : "ok");
}

static int syscalls(void)
{
	report("mount", mount("tmpfs", "/tmp", "tmpfs", 0, NULL));
	report("umount", umount2("/proc", MNT_DETACH));
	report("unshare_user", unshare(CLONE_NEWUSER));
	report("unshare_net", unshare(CLONE_NEWNET));
	report("setns", setns(0, 0));
	report("ptrace_attach", ptrace(PTRACE_ATTACH, 1, 0, 0));
	report("ptrace_traceme", ptrace(PTRACE_TRACEME, 0, 0, 0));
	report("keyctl", syscall(SYS_keyctl, 0, 0, 0, 0, 0));
	report("add_key", syscall(SYS_add_key, "user", "x", "y", 1, -1));
	report("bpf", syscall(SYS_bpf, BPF_PROG_LOAD, NULL, 0));
	report("perf_event_open", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
	report("userfaultfd", syscall(SYS_userfaultfd, 0));
	report("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
	report("init_module", syscall(SYS_init_module, NULL, 0, ""));
	report("finit_module", syscall(SYS_finit_module, 0, "", 0));
	report("delete_module", syscall(SYS_delete_module, "x", 0));
	report("reboot", syscall(SYS_reboot, 0, 0, 0, NULL));
	report("swapon", syscall(SYS_swapon, "/tmp/x", 0));
	report("pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp"));
	report("open_by_handle_at", syscall(SYS_open_by_handle_at, 0, NULL, 0));
	report("chroot", chroot("/tmp"));
	long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
	if (pid == 0)
		_exit(0);
	report("clone_newuser", pid);
	pid = fork();
	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	report("fork", pid);
	report("setuid0", setuid(0));
	return 0;
}

static long try_socket(int family, int type, int protocol)
{
	int fd = socket(family, type, protocol);
	if (fd >= 0)
		close(fd);
	return fd;
}

/* Calls outside the allow list that the deny list before it let through,
 * the ones narrowed by argument, and the ones that answer ENOSYS. */
static int allowlist(void)
{
	unsigned long nodes = 0;
	int mode = 0;
	char ldt[16];
	report("get_mempolicy", syscall(SYS_get_mempolicy, &mode, &nodes, 8 * sizeof nodes, NULL, 0));
	report("modify_ldt", syscall(SYS_modify_ldt, 0, ldt, sizeof ldt));
	report("vmsplice", syscall(SYS_vmsplice, -1, NULL, 0, 0));
	report("socket_alg", try_socket(38 /* AF_ALG */, SOCK_SEQPACKET, 0));
	report("socket_netlink_audit", try_socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT));
	report("socket_inet", try_socket(AF_INET, SOCK_STREAM, 0));
	report("socket_inet6", try_socket(AF_INET6, SOCK_DGRAM, 0));
	report("socket_unix", try_socket(AF_UNIX, SOCK_STREAM, 0));
	report("socket_netlink_route", try_socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE));
	report("tiocsti", ioctl(0, TIOCSTI, "x"));
	report("tiocsti_high_bits", syscall(SYS_ioctl, 0, (1UL << 32) | TIOCSTI, "x"));
	report("personality_query", personality(0xffffffff));
	report("personality_no_aslr", personality(ADDR_NO_RANDOMIZE));
	report("clone3", syscall(SYS_clone3, NULL, 0));
	report("io_uring_setup", syscall(SYS_io_uring_setup, 1, NULL));
	report("unknown_nr", syscall(1000));
	return 0;
}

/* Forks until refused; children sleep so they all count. */
static int forkbomb(void)
{
	int n = 0;
	for (; n < 100000; n++) {
		pid_t p = fork();
		if (p < 0)
			break;
		if (p == 0) {
			pause();
			_exit(0);
		}
	}
	printf("forked=%d errno=%s\n", n, strerrorname_np(errno));
	fflush(stdout);
	return 0;
}

static int nofile(void)
{
	int n = 0;
	while (open("/dev/null", O_RDONLY) >= 0)
		n++;
	printf("opened=%d errno=%s\n", n, strerrorname_np(errno));
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "syscalls"))
		return syscalls();
	if (argc > 1 && !strcmp(argv[1], "allowlist"))
		return allowlist();
	if (argc > 1 && !strcmp(argv[1], "forkbomb"))
		return forkbomb();
	if (argc > 1 && !strcmp(argv[1], "nofile"))
		return nofile();
	return 2;
}
