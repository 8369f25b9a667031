/* Whether a held program (ah_sandbox_exec_start) has reached its read of
 * stdin, i.e. its start-up is over (sandbox.h: ah_sandbox_exec_reading). */
#include "sandbox/internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Seen from the host, in /proc: a process of the sandbox whose fd 0 is the
 * held pipe either blocks in read(0) (fs.readFileSync(0): /proc/PID/syscall
 * starts with read's number and "0x0") or watches fd 0 in an epoll set (process.stdin's 'data'
 * listeners: a "tfd: 0" line in the epoll fd's fdinfo). */

static bool reads_fd0(pid_t pid)
{
	char path[64], buf[64];
	snprintf(path, sizeof path, "/proc/%d/syscall", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	char want[32]; /* "<read's number> 0x0 ": read(0, …) */
	int w = snprintf(want, sizeof want, "%d 0x0 ", (int)SYS_read);
	return n > w && strncmp(buf, want, (size_t)w) == 0;
}

static bool fdinfo_watches_fd0(pid_t pid, const char *fd_name)
{
	char path[96], line[160];
	snprintf(path, sizeof path, "/proc/%d/fdinfo/%.16s", (int)pid, fd_name);
	FILE *f = fopen(path, "re");
	bool yes = false;
	if (!f)
		return false;
	while (!yes && fgets(line, sizeof line, f)) {
		int tfd = -1;
		yes = sscanf(line, "tfd: %d ", &tfd) == 1 && tfd == 0;
	}
	fclose(f);
	return yes;
}

static bool polls_fd0(pid_t pid)
{
	char path[32], link[64], target[64];
	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	bool yes = false;
	if (!d)
		return false;
	for (struct dirent *de; !yes && (de = readdir(d));) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(link, sizeof link, "%s/%.16s", path, de->d_name);
		ssize_t n = readlink(link, target, sizeof target - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (strcmp(target, "anon_inode:[eventpoll]") == 0)
			yes = fdinfo_watches_fd0(pid, de->d_name);
	}
	closedir(d);
	return yes;
}

bool sb_exec_held_reading(const struct ah_sandbox *sb)
{
	struct stat pipe_st;
	pid_t pids[64];
	if (!sb->held.on || fstat(sb->held.fd_in, &pipe_st) != 0)
		return false;
	char want[48], path[64], target[64];
	snprintf(want, sizeof want, "pipe:[%llu]", (unsigned long long)pipe_st.st_ino);
	int n = sb_cgroup_pids(sb, pids, 64);
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof path, "/proc/%d/fd/0", (int)pids[i]);
		ssize_t len = readlink(path, target, sizeof target - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		if (strcmp(target, want) == 0 && (reads_fd0(pids[i]) || polls_fd0(pids[i])))
			return true;
	}
	return false;
}
