/* Cgroups: memory, cpu and pids limits, on cgroup v1 (one hierarchy per
 * controller, as on these machines), v2 (one unified tree, most hosts), or a
 * mix of both: each controller is used wherever the host mounts it (a host
 * moving to v2 may have some controllers in the unified tree and the rest in
 * v1 hierarchies; tests/sandbox/test_cgroup_v2.py moves pids there).
 *
 * Each sandbox gets <hierarchy>/<runner's own cgroup>/<sandbox_cgroup>/slot<N>
 * (default "agenthost"; cgroup_place.c finds where); the parent's memory
 * limit is the host's sandbox memory budget (budget.c), so that however the sandboxes add up, the kernel's OOM killer
 * acts inside the parent, never on the database or the API. The keeper moves
 * itself into it before it runs anything (see sb_cgroup_join_file), and then
 * unshares its cgroup namespace so the sandbox sees its own cgroup as the
 * root. The memory cap makes the kernel OOM-kill inside the sandbox, never on
 * the host; the oom_kill counter tells exec what happened. Runs in the runner. */
#include "sandbox/internal.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { CG_MEM, CG_CPU, CG_PIDS };

/* The parent's limit. v1: memsw must stay >= the memory limit at every
 * step, so the order depends on the direction; trying memory, memsw, memory
 * covers both. v2 has no such coupling (swap is separate and off). A limit
 * below what the parent uses now fails (EBUSY): the caller says so. */
int sb_cgroup_set_parent_memory(long long bytes, ah_err *err)
{
	char path[320], path2[320], val[32];
	snprintf(val, sizeof val, "%lld", bytes);
	const char *dir = sb_g.cg[CG_MEM].path;
	if (sb_g.cg[CG_MEM].v2) {
		snprintf(path, sizeof path, "%s/memory.swap.max", dir);
		sb_write_file(path, "0");
		snprintf(path, sizeof path, "%s/memory.max", dir);
		if (sb_write_file(path, val) < 0)
			return ah_err_set(err, AH_EFAIL, "write %s: %s", path, strerror(errno));
		return 0;
	}
	snprintf(path, sizeof path, "%s/memory.limit_in_bytes", dir);
	snprintf(path2, sizeof path2, "%s/memory.memsw.limit_in_bytes", dir);
	int rc = sb_write_file(path, val);   /* fails when raising past memsw */
	sb_write_file(path2, val);           /* absent without swap accounting */
	if (rc < 0)
		rc = sb_write_file(path, val);
	if (rc < 0)
		return ah_err_set(err, AH_EFAIL, "write %s: %s", path, strerror(errno));
	return 0;
}

static void cg_path(char *out, size_t n, const sb_plan *p, int ctl, const char *file)
{
	snprintf(out, n, "%s/slot%d%s%s", sb_g.cg[ctl].path, p->slot, file ? "/" : "",
	         file ? file : "");
}

/* The slot's directory in the i-th distinct hierarchy. */
static void hier_path(char *out, size_t n, const sb_plan *p, int i)
{
	cg_path(out, n, p, sb_g.cg_hier[i], NULL);
}

static int set(const struct ah_sandbox *sb, int ctl, const char *file, const char *val,
               bool optional, ah_err *err)
{
	char path[400];
	cg_path(path, sizeof path, &sb->plan, ctl, file);
	if (sb_write_file(path, val) < 0 && !(optional && errno == ENOENT))
		return ah_err_set(err, AH_EFAIL, "write %s: %s", path, strerror(errno));
	return 0;
}

/* memsw must stay >= the memory limit at every step: memory first when
 * lowering (fails when raising a claimed sandbox's cap), then memsw, then
 * memory again if it failed. */
static int set_memory(const struct ah_sandbox *sb, const char *mem, ah_err *err)
{
	if (sb_g.cg[CG_MEM].v2) {
		int rc = set(sb, CG_MEM, "memory.max", mem, false, err);
		return rc ? rc : set(sb, CG_MEM, "memory.swap.max", "0", true, err);
	}
	bool mem_set = set(sb, CG_MEM, "memory.limit_in_bytes", mem, false, NULL) == 0;
	int rc = set(sb, CG_MEM, "memory.memsw.limit_in_bytes", mem, true, err);
	if (!rc && !mem_set)
		rc = set(sb, CG_MEM, "memory.limit_in_bytes", mem, false, err);
	return rc;
}

static int set_cpu(const struct ah_sandbox *sb, int cpus, ah_err *err)
{
	char quota[48];
	if (sb_g.cg[CG_CPU].v2) {
		snprintf(quota, sizeof quota, "%d 100000", cpus * 100000);
		return set(sb, CG_CPU, "cpu.max", quota, false, err);
	}
	snprintf(quota, sizeof quota, "%d", cpus * 100000);
	int rc = set(sb, CG_CPU, "cpu.cfs_period_us", "100000", false, err);
	return rc ? rc : set(sb, CG_CPU, "cpu.cfs_quota_us", quota, false, err);
}

int sb_cgroup_set_limits(struct ah_sandbox *sb, ah_err *err)
{
	const sb_plan *p = &sb->plan;
	char mem[32], pids[32];
	snprintf(mem, sizeof mem, "%lld", p->memory_bytes);
	snprintf(pids, sizeof pids, "%d", p->pids_max);
	int rc;
	if ((rc = set_memory(sb, mem, err)) || (rc = set_cpu(sb, p->cpus, err)))
		return rc;
	return set(sb, CG_PIDS, "pids.max", pids, false, err); /* same name in v1 and v2 */
}

/* The memory cgroup's file with the OOM-kill count: v1's memory.oom_control,
 * v2's memory.events; -1 if it cannot be opened. */
static int open_oom_file(const struct ah_sandbox *sb)
{
	char path[400];
	cg_path(path, sizeof path, &sb->plan, CG_MEM,
	        sb_g.cg[CG_MEM].v2 ? "memory.events" : "memory.oom_control");
	return open(path, O_RDONLY | O_CLOEXEC);
}

int sb_cgroup_setup(struct ah_sandbox *sb, ah_err *err)
{
	char path[400];
	for (int i = 0; i < sb_g.cg_nhier; i++) {
		hier_path(path, sizeof path, &sb->plan, i);
		if (mkdir(path, 0755) < 0)
			return ah_err_set(err, AH_EFAIL, "mkdir %s: %s", path, strerror(errno));
	}
	/* A new memory cgroup has killed nothing yet: the first exec needs no
	 * read of it before it starts. */
	sb->oom_fd = open_oom_file(sb);
	sb->oom_kills = 0;
	return sb_cgroup_set_limits(sb, err);
}

/* The keeper moves itself into its slot's cgroups, first thing after GO, by
 * writing 0 to these files. v1's per-thread "tasks" file, written by the task
 * itself, skips the cgroup core's global threadgroup lock, whose write side
 * waits for an RCU grace period: moving the keeper from the runner cost 5-15
 * ms per sandbox, this ~0.2 ms. v2 has only cgroup.procs, which takes that
 * lock (the pool builds ahead of time, so no call waits for it). Everything
 * the keeper starts is born inside. */
void sb_cgroup_join_file(const sb_plan *p, int i, char *out, size_t n)
{
	out[0] = '\0';
	if (i < sb_g.cg_nhier) {
		int ctl = sb_g.cg_hier[i];
		cg_path(out, n, p, ctl, sb_g.cg[ctl].v2 ? "cgroup.procs" : "tasks");
	}
}

/* The count of OOM kills in the file's text: v1's oom_control and v2's
 * memory.events both have an "oom_kill N" line. */
static long long oom_kill_line(char *text)
{
	long long n = 0;
	for (char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
		if (strncmp(line, "oom_kill ", 9) == 0) {
			char *end;
			long long v = strtoll(line + 9, &end, 10);
			if (end != line + 9 && (*end == '\n' || *end == '\0'))
				n = v;
		}
	return n;
}

/* Read through the file opened once at the set-up (a pread from 0 makes the
 * kernel print it afresh): on a call's clock twice per run, and opening it
 * by its path took ~80 us there, most of the exec's time outside the
 * program's start and run. */
long long sb_cgroup_oom_count(const struct ah_sandbox *sb)
{
	char text[512];
	int fd = sb->oom_fd >= 0 ? sb->oom_fd : open_oom_file(sb);
	ssize_t n = fd < 0 ? -1 : pread(fd, text, sizeof text - 1, 0);
	if (fd >= 0 && fd != sb->oom_fd)
		close(fd);
	if (n <= 0)
		return 0;
	text[n] = '\0';
	return oom_kill_line(text);
}

int sb_cgroup_pids(const struct ah_sandbox *sb, pid_t *out, int max)
{
	char path[400], line[64];
	cg_path(path, sizeof path, &sb->plan, CG_MEM, "cgroup.procs");
	FILE *f = fopen(path, "re");
	int n = 0;
	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof line, f)) {
		char *end;
		long long pid = strtoll(line, &end, 10);
		if (end != line && pid > 1 && pid <= INT_MAX)
			out[n++] = (pid_t)pid;
	}
	fclose(f);
	return n;
}

/* rmdir fails with EBUSY while the last exiting task is still being
 * accounted; it is a matter of milliseconds. */
static void rmdir_retry(const char *path)
{
	for (int i = 0; i < 200; i++) {
		if (rmdir(path) == 0 || errno == ENOENT)
			return;
		if (errno != EBUSY)
			break;
		nanosleep(&(struct timespec){ 0, 5 * 1000 * 1000 }, NULL);
	}
}

void sb_cgroup_teardown(struct ah_sandbox *sb)
{
	char path[400];
	if (sb->oom_fd >= 0)
		close(sb->oom_fd);
	sb->oom_fd = -1;
	for (int i = 0; i < sb_g.cg_nhier; i++) {
		hier_path(path, sizeof path, &sb->plan, i);
		rmdir_retry(path);
	}
}

static void kill_procs(const char *dir)
{
	char path[700], line[64];
	snprintf(path, sizeof path, "%s/cgroup.procs", dir);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		long long pid;
		line[strcspn(line, "\n")] = '\0';
		char *end;
		pid = strtoll(line, &end, 10);
		if (end != line && pid > 1)
			kill((pid_t)pid, SIGKILL);
	}
	fclose(f);
}

/* What a dead owner of this slot left: its keeper died with it (PDEATHSIG),
 * so the cgroup is normally empty; kill whatever is left, then remove it. */
void sb_cgroup_clear_slot(struct ah_sandbox *sb)
{
	char path[400];
	for (int i = 0; i < sb_g.cg_nhier; i++) {
		hier_path(path, sizeof path, &sb->plan, i);
		if (access(path, F_OK) < 0)
			continue;
		kill_procs(path);
		rmdir_retry(path);
	}
}
