/* Disk: the size cap of the sandbox's writable layer.
 *
 * Each sandbox gets a sparse file of disk_bytes holding an empty ext4 and
 * attached to a loop device; the keeper mounts it inside its own mount
 * namespace and puts the overlay's upper layer and /tmp on it, so writes past
 * the cap fail with ENOSPC and never fill the host's disk. The file is
 * unlinked as soon as the loop device holds it, and the device is attached
 * with AUTOCLEAR, so when the sandbox's mount namespace dies the kernel
 * releases both: a crashed runner leaks neither.
 *
 * mkfs.ext4 runs once per disk size per process, into a template that is
 * never mounted (unlinked at once, only its read-only fd is kept); each
 * sandbox gets a fresh copy of the template's few data blocks (~200 KiB, no
 * resize inode) into a new sparse file: a pristine, empty filesystem of its
 * own, without a process spawn per sandbox. Runs in the runner. */
#include "sandbox/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/loop.h>

extern char **environ;

static int run_mkfs(const char *file, const char *root)
{
	/* No journal: the disk never outlives a crash, so there is nothing to
	 * recover; lazy init keeps mkfs from writing the inode tables; no
	 * resize inode (never resized), which leaves ~200 KiB of data to copy.
	 * -d root: the directories the keeper needs are in the template, so no
	 * sandbox allocates their blocks (mounts.c only makes missing ones). */
	char *argv[] = { "mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal,^resize_inode",
	                 "-E", "lazy_itable_init=1,nodiscard", "-d", (char *)root, (char *)file, NULL };
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

/* ---- templates: one mkfs per disk size, kept as a read-only unlinked fd ---- */

#define NTEMPLATES 8

static pthread_mutex_t tmpl_mu = PTHREAD_MUTEX_INITIALIZER;
static struct { long long bytes; int fd; } tmpl[NTEMPLATES];
static int ntmpl;

static int make_template(const char *dir_file, long long bytes)
{
	char path[600];
	/* Next to the disks, named per process: runners sharing a root never
	 * touch each other's. */
	snprintf(path, sizeof path, "%s.tmpl-%d-%lld", dir_file, (int)getpid(), bytes);
	unlink(path);
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	int rc = ftruncate(fd, bytes);
	close(fd);
	char root[640], sub[700];
	snprintf(root, sizeof root, "%s.d", path);
	rc = rc < 0 || (mkdir(root, 0700) < 0 && errno != EEXIST) ? -1 : 0;
	for (size_t i = 0; i < sizeof SB_DISK_DIRS / sizeof SB_DISK_DIRS[0] && rc == 0; i++) {
		snprintf(sub, sizeof sub, "%s/%s", root, SB_DISK_DIRS[i].name);
		if (mkdir(sub, SB_DISK_DIRS[i].mode) < 0 || chmod(sub, SB_DISK_DIRS[i].mode) < 0)
			rc = -1;
	}
	if (rc == 0 && run_mkfs(path, root) == 0)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	else
		fd = -1;
	int e = errno;
	for (size_t i = 0; i < sizeof SB_DISK_DIRS / sizeof SB_DISK_DIRS[0]; i++) {
		snprintf(sub, sizeof sub, "%s/%s", root, SB_DISK_DIRS[i].name);
		rmdir(sub);
	}
	rmdir(root);
	unlink(path);
	errno = e;
	return fd;
}

/* The template fd for this size (made on first use), or -1. */
static int template_fd(const sb_plan *p)
{
	pthread_mutex_lock(&tmpl_mu);
	int fd = -1;
	for (int i = 0; i < ntmpl && fd < 0; i++)
		if (tmpl[i].bytes == p->disk_bytes)
			fd = tmpl[i].fd;
	if (fd < 0) {
		char base[512];
		snprintf(base, sizeof base, "%s/disk", sb_g.root);
		fd = make_template(base, p->disk_bytes);
		if (fd >= 0 && ntmpl < NTEMPLATES)
			tmpl[ntmpl++].bytes = p->disk_bytes, tmpl[ntmpl - 1].fd = fd;
		else if (fd >= 0) {
			/* Unusual sizes beyond the cache: replace the last one. */
			close(tmpl[NTEMPLATES - 1].fd);
			tmpl[NTEMPLATES - 1].bytes = p->disk_bytes;
			tmpl[NTEMPLATES - 1].fd = fd;
		}
	}
	pthread_mutex_unlock(&tmpl_mu);
	return fd;
}

static int copy_range(int from, int to, off_t off, off_t len)
{
	off_t in = off, out = off;
	while (len > 0) {
		ssize_t n = copy_file_range(from, &in, to, &out, (size_t)len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* Not supported here (or nothing copied): plain reads and writes. */
			char buf[65536];
			ssize_t r = pread(from, buf, (size_t)(len < (off_t)sizeof buf ? len : (off_t)sizeof buf), in);
			if (r <= 0 || pwrite(to, buf, (size_t)r, out) != r)
				return -1;
			n = r;
			in += n;
			out += n;
		}
		len -= n;
	}
	return 0;
}

/* Copies the template's data extents (its holes stay holes) into fd. */
static int copy_template(int tfd, int fd, long long bytes)
{
	off_t off = 0;
	while (off < bytes) {
		off_t d = lseek(tfd, off, SEEK_DATA);
		if (d < 0)
			return errno == ENXIO ? 0 : -1;
		off_t h = lseek(tfd, d, SEEK_HOLE);
		if (h < 0)
			return -1;
		if (copy_range(tfd, fd, d, h - d) < 0)
			return -1;
		off = h;
	}
	return 0;
}

int sb_disk_setup(sb_plan *p, ah_err *err)
{
	p->loop_fd = p->disk_fd = -1;
	p->loop_dev[0] = '\0';
	if (p->disk_bytes <= 0)
		return 0;
	int tfd = template_fd(p);
	if (tfd < 0)
		return ah_err_set(err, AH_EFAIL, "mkfs.ext4 of a %lld-byte disk failed (is e2fsprogs "
		                  "installed?)", p->disk_bytes);
	int fd = open(p->disk_file, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return ah_err_set(err, AH_EFAIL, "create %s: %s", p->disk_file, strerror(errno));
	int rc = AH_EFAIL;
	if (ftruncate(fd, p->disk_bytes) < 0) {
		ah_err_set(err, AH_EFAIL, "size disk: %s", strerror(errno));
		goto done;
	}
	if (copy_template(tfd, fd, p->disk_bytes) < 0) {
		ah_err_set(err, AH_EFAIL, "copy the disk template: %s", strerror(errno));
		goto done;
	}
	if (attach_loop(p, fd) < 0) {
		ah_err_set(err, AH_EFAIL, "loop device: %s", strerror(errno));
		goto done;
	}
	rc = 0;
done:
	/* Kept open (read only by the budget: how much of the disk is written,
	 * see budget.c) until the sandbox is torn down. */
	if (rc == 0)
		p->disk_fd = fd;
	else
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
	if (p->disk_fd >= 0)
		close(p->disk_fd);
	p->disk_fd = -1;
	if (p->disk_file[0])
		unlink(p->disk_file);
}
