/* User namespace: who the sandbox's processes are on the host.
 *
 * The spawner unshares a user namespace whose uid/gid 0..65535 map to
 * uid_base..uid_base+65535 on the host (one range per slot, so two sandboxes
 * never share a host uid and per-user kernel limits do not couple them). The
 * keeper, still real root in the parent namespace, writes the maps. Programs
 * then run as 1000 inside = uid_base+1000 outside, with no capabilities.
 * The image is shown at /app's lower layer through an idmapped mount whose
 * user namespace maps host uid 0 to the agent's host uid: files owned by root
 * on disk appear as the agent's (it may change them, in its own upper layer,
 * on its own disk). No sandbox, a build's included, writes into a host
 * directory: nothing it creates can be root's on the host.
 * Runs inside the sandbox (except sb_userns_idmap_fd): no malloc, no stdio. */
#include "sandbox/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>
#include <linux/capability.h>
#include <unistd.h>

static int write_proc(pid_t pid, const char *file, const char *data)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
	return sb_write_file(path, data);
}

int sb_userns_write_maps(pid_t pid, unsigned uid_base)
{
	char map[64];
	snprintf(map, sizeof map, "0 %u %u\n", uid_base, SB_IDS_PER_SLOT);
	if (write_proc(pid, "uid_map", map) < 0)
		return -1;
	return write_proc(pid, "gid_map", map);
}

/* After the maps are written the spawner still carries host uid 0 (unmapped,
 * shown as 65534): switching to 0 inside makes its host identity uid_base, so
 * it no longer has root's file access on anything it can see. It then empties
 * its bounding set (CAP_SETPCAP, which root inside has), once for every
 * program it starts: no exec can gain a capability back. The spawner itself
 * never execs, so it keeps what it needs (new pid namespaces). */
int sb_userns_become_root(void)
{
	if (setresgid(0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresuid(0, 0, 0) < 0)
		return -1;
	for (int cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -1;
	return 0;
}

/* Drops to the agent user: the uid change clears the permitted, effective
 * and ambient sets because SECBIT_KEEP_CAPS is not set (the bounding set is
 * empty already: sb_userns_become_root). */
int sb_userns_drop_to_agent(void)
{
	if (prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0) != 0)
		return -1; /* never: the spawner emptied it */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return -1;
	if (setgroups(0, NULL) < 0)
		return -1;
	if (setresgid(SB_AGENT_UID, SB_AGENT_UID, SB_AGENT_UID) < 0)
		return -1;
	if (setresuid(SB_AGENT_UID, SB_AGENT_UID, SB_AGENT_UID) < 0)
		return -1;
	/* Refuse to go on if anything could give the privileges back. */
	if (setresuid(0, 0, 0) == 0)
		return -1;
	return 0;
}

/* A user namespace mapping 0 to host uid `to` (runner side): a throw-away
 * child holds it while we write its maps and open it. */
int sb_userns_idmap_fd(unsigned to)
{
	int pfd[2];
	char b, map[64], path[64];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid == 0) {
		/* Keep only our pipe's read end: a write end of another thread's
		 * pipe held here (pool builders run in parallel) would keep that
		 * thread's child from ever seeing EOF, and it would wait for ours. */
		if (pfd[0] > 0)
			syscall(SYS_close_range, 0, (unsigned)pfd[0] - 1, 0);
		syscall(SYS_close_range, (unsigned)pfd[0] + 1, ~0U, 0);
		_exit(read(pfd[0], &b, 1) < 0);
	}
	close(pfd[0]);
	int fd = -1;
	snprintf(map, sizeof map, "0 %u 1\n", to);
	snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
	if (pid > 0 && write_proc(pid, "uid_map", map) == 0 && write_proc(pid, "gid_map", map) == 0)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	int e = errno;
	close(pfd[1]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	errno = e;
	return fd;
}
