/* Budget: the host-wide memory and disk that sandboxes may take, so that
 * however many are asked for, MariaDB, nginx and the API keep theirs.
 *
 * Memory: every sandbox's cgroup is under one parent whose limit is
 * sandbox_memory_budget_mb (default: host RAM minus max(2 GiB, 25%)), and a
 * sandbox is admitted only while the memory caps of all live sandboxes under
 * that parent, its own included, fit in the budget. Admission makes the
 * parent's limit a backstop that is never reached in practice; the limit
 * keeps the kernel's OOM killer inside the parent if it is.
 *
 * Disk: the sandbox disks are sparse files on sandbox_root's filesystem. A
 * sandbox is admitted only if the free space, minus the part of every live
 * disk not written yet, minus its own full size, stays above disk_reserve_mb
 * (default max(1 GiB, 5% of the filesystem)). Strict on purpose: every live
 * disk can then grow to its cap without taking the reserve (issue 17), at the
 * price that the free space must cover sandbox_disk_mb per live sandbox.
 *
 * Host-wide: several runner processes (and the CLI) share a host. Each live
 * sandbox's commitment is written into its slot's lock file (sandbox.c), held
 * by its owner with flock; admission runs under one host-wide lock, sums the
 * records of the slots somebody holds (a dead owner's lock is free, so its
 * stale record is ignored, as is one naming a dead process) and writes its
 * own. A disk's written part is read through its owner's descriptor
 * (/proc/<pid>/fd/<n>); when that cannot be read the disk counts in full. Records of another cgroup parent count for
 * memory only under that parent, for disk on the same filesystem only.
 *
 * A sandbox built ahead (a pool refill nobody waits for) must leave room for
 * one more sandbox, so that pre-made ones never take a waiting call's place.
 * Runs in the runner. */
#include "sandbox/internal.h"

#include "core/config.h"
#include "core/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define LOCK_DIR "/run/agenthost-sandbox"
#define RECORD_LEN 160
#define MIB (1LL << 20)
#define GIB (1LL << 30)

/* What one live sandbox holds, as written in its slot's lock file. */
typedef struct record {
	char scope[64];
	long long memory, disk;
	unsigned long long dev;      /* filesystem of its disk */
	int pid, fd;                 /* the disk file, open in its owner; fd -1: not yet */
} record;

typedef struct totals {
	long long memory;            /* caps under our cgroup parent */
	long long disk_unused;       /* not yet written parts of disks on our filesystem */
} totals;

static unsigned long long root_dev;

static long long host_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
	return pages > 0 && size > 0 ? (long long)pages * size : 0;
}

static int read_limits(const ah_sandbox_settings *set, ah_err *err)
{
	long long ram = host_memory(), reserve = ram / 4 > 2 * GIB ? ram / 4 : 2 * GIB;
	long long mb = set->memory_budget_mb;
	sb_g.memory_budget = mb > 0 ? mb * MIB : ram - reserve;
	/* A host too small for the default reserve still runs one sandbox. */
	if (sb_g.memory_budget < sb_g.memory_bytes)
		sb_g.memory_budget = sb_g.memory_bytes;
	struct statvfs vs;
	struct stat st;
	if (statvfs(sb_g.root, &vs) < 0 || stat(sb_g.root, &st) < 0)
		return ah_err_set(err, AH_EFAIL, "statvfs %s: %s", sb_g.root, strerror(errno));
	root_dev = (unsigned long long)st.st_dev;
	long long size = (long long)vs.f_blocks * (long long)vs.f_frsize;
	long long rmb = set->disk_reserve_mb;
	sb_g.disk_reserve = rmb >= 0 ? rmb * MIB : (size / 20 > GIB ? size / 20 : GIB);
	return 0;
}

static long long free_bytes(void)
{
	struct statvfs vs;
	if (statvfs(sb_g.root, &vs) < 0)
		return -1;
	return (long long)vs.f_bavail * (long long)vs.f_frsize;
}

/* How many sandboxes of the default size fit now, by memory and by disk, so
 * that an operator reads at start what the strict disk promise costs here:
 * with the 10 GiB default, a disk with 30 GB free runs two calls at once
 * whatever the memory allows. Another runner's live sandboxes are not
 * counted: this is the room a start sees, not a promise. */
static void log_room(void)
{
	long long avail = free_bytes();
	if (sb_g.disk_bytes <= 0 || sb_g.memory_bytes <= 0 || avail < 0) /* tmpfs disks */
		return;
	long long by_mem = sb_g.memory_budget / sb_g.memory_bytes;
	long long by_disk = avail > sb_g.disk_reserve ? (avail - sb_g.disk_reserve) / sb_g.disk_bytes : 0;
	if (by_disk >= by_mem)
		return;
	ah_log_warn("sandbox: the disk has room for %lld sandbox(es) at once, the memory budget "
	            "for %lld: %lld MiB free, %lld MiB kept in reserve (disk_reserve_mb), each "
	            "sandbox's disk of %lld MiB promised in full; lower sandbox_disk_mb to run more",
	            by_disk, by_mem, avail / MIB, sb_g.disk_reserve / MIB, sb_g.disk_bytes / MIB);
}

int sb_budget_init(const ah_sandbox_settings *set, ah_err *err)
{
	int rc = read_limits(set, err);
	if (rc)
		return rc;
	ah_err why = { 0 };
	if (sb_cgroup_set_parent_memory(sb_g.memory_budget, &why) != 0)
		/* Below what the parent uses now (another runner's sandboxes):
		 * admission still holds; the next start sets it. */
		ah_log_warn("sandbox: cannot set the memory budget as the cgroup limit: %s", why.msg);
	ah_log_info("sandbox: memory budget %lld MiB under cgroup %s, disk reserve %lld MiB",
	            sb_g.memory_budget / MIB, sb_g.cg_name, sb_g.disk_reserve / MIB);
	log_room();
	return 0;
}

/* ---- records ---- */

static void write_record(int lock_fd, const char *text)
{
	char buf[RECORD_LEN];
	/* Fixed length, so a shorter record never leaves a tail of the last. */
	memset(buf, ' ', sizeof buf);
	size_t n = strlen(text);
	memcpy(buf, text, n < sizeof buf - 1 ? n : sizeof buf - 1);
	buf[sizeof buf - 1] = '\n';
	if (pwrite(lock_fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf)
		ah_log_warn("sandbox: cannot write the budget record: %s", strerror(errno));
}

static void put_record(const struct ah_sandbox *sb, int lock_fd)
{
	char text[RECORD_LEN];
	const sb_plan *p = &sb->plan;
	snprintf(text, sizeof text, "%s %lld %lld %llu %d %d", sb_g.cg_name, p->memory_bytes,
	         p->disk_bytes, root_dev, (int)getpid(), p->disk_fd);
	write_record(lock_fd, text);
}

/* The record of slot file name, if somebody holds that slot. */
static bool read_record(int dir, const char *name, record *r)
{
	char buf[RECORD_LEN + 1];
	int fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	bool held = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	ssize_t n = held ? pread(fd, buf, RECORD_LEN, 0) : -1;
	close(fd); /* also lets go of our shared lock, if we got it */
	if (n <= 0)
		return false;
	buf[n] = '\0';
	if (sscanf(buf, "%63s %lld %lld %llu %d %d", r->scope, &r->memory, &r->disk, &r->dev,
	           &r->pid, &r->fd) != 6 || r->memory < 0 || r->disk < 0 || r->pid <= 0)
		return false;
	/* Left by a dead owner in a slot somebody holds now without writing
	 * its own record yet (or a runner older than records). */
	return kill(r->pid, 0) == 0 || errno != ESRCH;
}

/* The part of r's disk not written yet: its size when it cannot be read. */
static long long disk_unused(const record *r)
{
	char path[64];
	struct stat st;
	if (r->fd < 0)
		return r->disk;
	snprintf(path, sizeof path, "/proc/%d/fd/%d", r->pid, r->fd);
	if (stat(path, &st) < 0 || st.st_size != r->disk)
		return r->disk;
	long long used = (long long)st.st_blocks * 512;
	return used < r->disk ? r->disk - used : 0;
}

/* The inodes somebody holds a flock on, from /proc/locks: one read instead of
 * an open, a flock and a close for every slot file (a host keeps each slot
 * file it ever used: 200 and more on a busy one, some 650 system calls on
 * every sandbox's admission). The kernel lists only locks whose owner this
 * pid namespace sees; read_record's kill(pid, 0) assumes the same. The
 * device is not compared: stat's and /proc/locks' differ on btrfs, and an
 * inode held elsewhere only costs the flock test read_record makes anyway.
 * Returns the count, or -1 when /proc/locks cannot be read or has more
 * than fits (then every slot file is tried, as before). */
#define HELD_MAX 4096
static int held_inodes(unsigned long *ino)
{
	FILE *f = fopen("/proc/locks", "re");
	if (!f)
		return -1;
	char line[256], mode[16];
	unsigned maj, min;
	int n = 0, pid;
	while (n >= 0 && fgets(line, sizeof line, f)) {
		const char *p = strstr(line, "FLOCK ");
		/* "->" marks a waiter, not a holder. */
		if (!p || strstr(line, "->") ||
		    sscanf(p, "FLOCK %*s %15s %d %x:%x:%lu", mode, &pid, &maj, &min, &ino[n]) != 5)
			continue;
		n = n < HELD_MAX - 1 ? n + 1 : -1;
	}
	fclose(f);
	return n;
}

static bool in(const unsigned long *ino, int n, unsigned long x)
{
	for (int i = 0; i < n; i++)
		if (ino[i] == x)
			return true;
	return false;
}

/* Every live sandbox's commitment but the one in slot `self`. */
static int sum_records(totals *t, int self)
{
	DIR *d = opendir(LOCK_DIR);
	if (!d)
		return -1;
	static unsigned long held[HELD_MAX]; /* under the budget lock: one caller */
	int nheld = held_inodes(held);
	struct dirent *de;
	record r;
	int slot, end;
	memset(t, 0, sizeof *t);
	while ((de = readdir(d))) {
		if (sscanf(de->d_name, "slot-%d%n", &slot, &end) != 1 ||
		    strcmp(de->d_name + end, ".lock") != 0 || slot == self ||
		    (nheld >= 0 && !in(held, nheld, (unsigned long)de->d_ino)) ||
		    !read_record(dirfd(d), de->d_name, &r))
			continue;
		if (strcmp(r.scope, sb_g.cg_name) == 0)
			t->memory += r.memory;
		if (r.dev == root_dev)
			t->disk_unused += disk_unused(&r);
	}
	closedir(d);
	return 0;
}

/* ---- admission ---- */

/* 0 when p fits next to what t counts (and, ahead, one more default
 * sandbox fits too), else AH_EBUSY with the reason. */
static int fits(const sb_plan *p, const totals *t, bool ahead, ah_err *err)
{
	long long mem = t->memory + p->memory_bytes + (ahead ? sb_g.memory_bytes : 0);
	if (mem > sb_g.memory_budget)
		return ah_err_set(err, AH_EBUSY, "the host is at its sandbox memory budget (%lld MiB "
		                  "asked, %lld of %lld MiB committed); retry later",
		                  p->memory_bytes / MIB, t->memory / MIB, sb_g.memory_budget / MIB);
	/* Checked without a disk of its own too (a tmpfs instead): below the
	 * reserve, no new sandbox, deploy builds included. */
	long long avail = free_bytes();
	long long want = t->disk_unused + p->disk_bytes + (ahead ? sb_g.disk_bytes : 0);
	if (avail < 0 || avail - want < sb_g.disk_reserve)
		return ah_err_set(err, AH_EBUSY, "the host's disk is at its free-space reserve (%lld MiB "
		                  "asked, %lld MiB free, %lld MiB promised to live sandboxes, %lld MiB "
		                  "reserved); retry later", p->disk_bytes / MIB, avail / MIB,
		                  t->disk_unused / MIB, sb_g.disk_reserve / MIB);
	return 0;
}

/* The host-wide lock every admission and record change holds, or -1. */
static int budget_lock(void)
{
	int lk = open(LOCK_DIR "/budget.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lk >= 0 && flock(lk, LOCK_EX) < 0) {
		int e = errno;
		close(lk);
		errno = e;
		return -1;
	}
	return lk;
}

int sb_budget_admit(struct ah_sandbox *sb, int lock_fd, ah_err *err)
{
	int lk = budget_lock();
	if (lk < 0)
		return ah_err_set(err, AH_EFAIL, "budget lock: %s", strerror(errno));
	totals t;
	int rc = sum_records(&t, sb->plan.slot) < 0
	         ? ah_err_set(err, AH_EFAIL, "read " LOCK_DIR ": %s", strerror(errno))
	         : fits(&sb->plan, &t, sb->ahead, err);
	if (rc == 0) {
		put_record(sb, lock_fd);
		sb->budget_held = true;
	} else if (!sb->budget_held) {
		write_record(lock_fd, ""); /* a dead owner's, in a slot we now keep */
	}
	close(lk);
	return rc;
}

void sb_budget_note_disk(struct ah_sandbox *sb, int lock_fd)
{
	if (!sb->budget_held)
		return;
	int lk = budget_lock();
	put_record(sb, lock_fd);
	if (lk >= 0)
		close(lk);
}

void sb_budget_release(struct ah_sandbox *sb, int lock_fd)
{
	if (!sb->budget_held)
		return;
	sb->budget_held = false;
	int lk = budget_lock();
	write_record(lock_fd, "");
	if (lk >= 0)
		close(lk);
}
