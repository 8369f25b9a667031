/* Disk: the size cap of the sandbox's writable layer.
 *
 * Each sandbox gets a sparse file of disk_bytes formatted as ext4 and attached
 * to a loop device; the keeper mounts it inside its own mount namespace and
 * puts the overlay's upper layer and /tmp on it, so writes past the cap fail
 * with ENOSPC and never fill the host's disk. The file is unlinked as soon as
 * the loop device holds it, and the device is attached with AUTOCLEAR, so when
 * the sandbox's mount namespace dies the kernel releases both: a crashed
 * runner leaks neither. mkfs costs ~10 ms, which the pool keeps off the
 * critical path. Runs in the runner. */
#include "sandbox/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/loop.h>

extern char **environ;

static int run_mkfs(const char *file)
{
	/* No journal: the disk never outlives a crash, so there is nothing to
	 * recover; lazy init keeps mkfs from writing the inode tables. */
	char *argv[] = { "mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal",
	                 "-E", "lazy_itable_init=1,nodiscard", (char *)file, NULL };
	char *envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int rc = posix_spawnp(&pid, "mkfs.ext4", &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		errno = rc;
		return -1;
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int attach_loop(sb_plan *p, int file_fd)
{
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return -1;
	/* Another process can take the free device between GET_FREE and
	 * CONFIGURE: retry on EBUSY. */
	for (int tries = 0; tries < 20; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0)
			break;
		snprintf(p->loop_dev, sizeof p->loop_dev, "/dev/loop%d", n);
		int fd = open(p->loop_dev, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			break;
		struct loop_config cfg = { .fd = (unsigned)file_fd };
		cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0) {
			close(ctl);
			p->loop_fd = fd;
			return 0;
		}
		int e = errno;
		close(fd);
		if (e != EBUSY) {
			errno = e;
			break;
		}
	}
	int e = errno;
	close(ctl);
	p->loop_dev[0] = '\0';
	errno = e;
	return -1;
}

int sb_disk_setup(sb_plan *p, ah_err *err)
{
	p->loop_fd = -1;
	p->loop_dev[0] = '\0';
	if (p->disk_bytes <= 0)
		return 0;
	int fd = open(p->disk_file, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return ah_err_set(err, AH_EFAIL, "create %s: %s", p->disk_file, strerror(errno));
	int rc = AH_EFAIL;
	if (ftruncate(fd, p->disk_bytes) < 0) {
		ah_err_set(err, AH_EFAIL, "size disk: %s", strerror(errno));
		goto done;
	}
	if (run_mkfs(p->disk_file) < 0) {
		ah_err_set(err, AH_EFAIL, "mkfs.ext4 %s failed (is e2fsprogs installed?)", p->disk_file);
		goto done;
	}
	if (attach_loop(p, fd) < 0) {
		ah_err_set(err, AH_EFAIL, "loop device: %s", strerror(errno));
		goto done;
	}
	rc = 0;
done:
	close(fd);
	unlink(p->disk_file); /* the loop device keeps the data alive */
	return rc;
}

/* Once the keeper has mounted the disk, the mount alone holds the device:
 * AUTOCLEAR then detaches it when the sandbox's namespace goes away. */
void sb_disk_close_loop(sb_plan *p)
{
	if (p->loop_fd >= 0)
		close(p->loop_fd);
	p->loop_fd = -1;
}

void sb_disk_teardown(sb_plan *p)
{
	/* Never mounted (set-up failed before the keeper mounted it): detach. */
	if (p->loop_fd >= 0) {
		ioctl(p->loop_fd, LOOP_CLR_FD, 0);
		sb_disk_close_loop(p);
	}
	if (p->disk_file[0])
		unlink(p->disk_file);
}
