/* Mounts: the sandbox's root filesystem, built by the keeper (real root, in its
 * own mount namespace, before any sandboxed code exists).
 *
 * The new root is a tmpfs that ends up read-only and holds: read-only binds of
 * /usr (plus /bin, /lib*, /sbin as on the host: links or read-only binds), a
 * curated /etc (only what node, DNS and TLS need), a minimal /dev, /proc with
 * hidepid so programs only see their own processes, /tmp on the sandbox's own
 * disk, and /app, mounted later from the image (overlay) or the deploy dir.
 * The sandbox's disk sits at /.sbx (0700) until /app is mounted, then it is
 * detached: the overlay and /tmp keep it alive, nothing else can reach it.
 * Runs inside the sandbox: no malloc, no stdio. */
#include "sandbox/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/mount.h>

static const char *const RO_TOP[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32" };
static const char *const RO_ETC[] = { "ssl", "ca-certificates", "ld.so.cache", "alternatives",
                                      "localtime", "mime.types" };
static const char *const DEVS[] = { "null", "zero", "full", "random", "urandom" };

static const char PASSWD[] =
	"root:x:0:0:root:/root:/usr/sbin/nologin\n"
	"agent:x:1000:1000:agent:/app:/usr/sbin/nologin\n"
	"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char GROUP[] = "root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n";
static const char HOSTS[] = "127.0.0.1 localhost sandbox\n::1 localhost\n";
static const char NSSWITCH[] = "passwd: files\ngroup: files\nhosts: files dns\n";

static int put_file(const char *path, const char *data, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -1;
	size_t len = strlen(data);
	ssize_t n = write(fd, data, len);
	close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

/* Recursive read-only, nosuid, nodev: a plain MS_REMOUNT only changes the top
 * mount of a recursive bind, mount_setattr(AT_RECURSIVE) changes them all. */
static int make_ro(const char *path)
{
	struct mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
	return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, AT_RECURSIVE, &a, sizeof a);
}

static int bind_ro(const char *src, const char *dst, bool is_dir)
{
	if (is_dir ? mkdir(dst, 0755) < 0 && errno != EEXIST : put_file(dst, "", 0644) < 0)
		return -1;
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
		return -1;
	return make_ro(dst);
}

/* Host /bin, /lib... are links into /usr on merged-usr systems: copy the link,
 * else bind the directory read-only. Absent ones are skipped. */
static int mirror_host_path(const char *root, const char *hostpath, const char *name)
{
	char dst[512], target[256];
	struct stat st;
	if (lstat(hostpath, &st) < 0)
		return 0;
	snprintf(dst, sizeof dst, "%s/%s", root, name);
	if (S_ISLNK(st.st_mode)) {
		ssize_t n = readlink(hostpath, target, sizeof target - 1);
		if (n < 0)
			return -1;
		target[n] = '\0';
		return symlink(target, dst);
	}
	return bind_ro(hostpath, dst, S_ISDIR(st.st_mode));
}

static int build_etc(const char *root, const char *resolv)
{
	char d[512], f[600], host[300];
	snprintf(d, sizeof d, "%s/etc", root);
	if (mkdir(d, 0755) < 0)
		return -1;
	const struct { const char *name, *data; } files[] = {
		{ "passwd", PASSWD }, { "group", GROUP }, { "hosts", HOSTS },
		{ "nsswitch.conf", NSSWITCH }, { "hostname", "sandbox\n" },
		{ "resolv.conf", resolv },
	};
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(f, sizeof f, "%s/%s", d, files[i].name);
		if (put_file(f, files[i].data, 0644) < 0)
			return -1;
	}
	for (size_t i = 0; i < sizeof RO_ETC / sizeof RO_ETC[0]; i++) {
		snprintf(host, sizeof host, "/etc/%s", RO_ETC[i]);
		snprintf(f, sizeof f, "etc/%s", RO_ETC[i]);
		if (mirror_host_path(root, host, f) < 0)
			return -1;
	}
	return 0;
}

static int build_dev(const char *root)
{
	char d[512], f[600], h[64];
	snprintf(d, sizeof d, "%s/dev", root);
	if (mkdir(d, 0755) < 0 ||
	    mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0)
		return -1;
	for (size_t i = 0; i < sizeof DEVS / sizeof DEVS[0]; i++) {
		snprintf(f, sizeof f, "%s/%s", d, DEVS[i]);
		snprintf(h, sizeof h, "/dev/%s", DEVS[i]);
		/* Bind the host's node: mknod would need the devices cgroup to agree. */
		if (put_file(f, "", 0666) < 0 || mount(h, f, NULL, MS_BIND, NULL) < 0)
			return -1;
	}
	const char *links[][2] = { { "/proc/self/fd", "fd" }, { "/proc/self/fd/0", "stdin" },
	                           { "/proc/self/fd/1", "stdout" }, { "/proc/self/fd/2", "stderr" } };
	for (size_t i = 0; i < 4; i++) {
		snprintf(f, sizeof f, "%s/%s", d, links[i][1]);
		if (symlink(links[i][0], f) < 0)
			return -1;
	}
	snprintf(f, sizeof f, "%s/shm", d);
	if (mkdir(f, 01777) < 0 ||
	    mount("tmpfs", f, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777,size=64m") < 0)
		return -1;
	return mount(NULL, d, NULL, MS_REMOUNT | MS_NOSUID | MS_NOEXEC | MS_RDONLY, "mode=0755,size=64k");
}

/* The writable disk: the per-sandbox ext4 loop device when there is one (its
 * size is the cap), else a size-capped tmpfs. upper/ belongs to the agent user
 * so that /app itself is writable; work/ is overlay's and stays root's. */
static int build_disk(const char *root, const sb_plan *p)
{
	char d[512], f[600];
	snprintf(d, sizeof d, "%s/.sbx", root);
	if (mkdir(d, 0700) < 0)
		return -1;
	if (p->loop_dev[0]) {
		/* noinit_itable: no background zeroing of the (never used) inode tables. */
		if (mount(p->loop_dev, d, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, "noinit_itable") < 0)
			return -1;
	} else {
		char opt[64];
		snprintf(opt, sizeof opt, "mode=0700,size=%lld", p->disk_bytes > 0 ? p->disk_bytes : 1LL << 30);
		if (mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, opt) < 0)
			return -1;
	}
	/* On the ext4 disk they exist already (the template has them). */
	for (size_t i = 0; i < sizeof SB_DISK_DIRS / sizeof SB_DISK_DIRS[0]; i++) {
		snprintf(f, sizeof f, "%s/%s", d, SB_DISK_DIRS[i].name);
		if (mkdir(f, SB_DISK_DIRS[i].mode) < 0 ? errno != EEXIST : chmod(f, SB_DISK_DIRS[i].mode) < 0)
			return -1;
	}
	uid_t agent = p->uid_base + SB_AGENT_UID;
	snprintf(f, sizeof f, "%s/upper", d);
	if (chown(f, agent, agent) < 0)
		return -1;
	snprintf(f, sizeof f, "%s/tmp", d);
	char t[512];
	snprintf(t, sizeof t, "%s/tmp", root);
	if (mkdir(t, 01777) < 0 || mount(f, t, NULL, MS_BIND, NULL) < 0)
		return -1;
	/* /files: managed files (attachments under agent/, session outputs under
	 * session/), on the same capped disk; the runner fills and reads it. */
	static const char *const FILES_SUBDIRS[] = {"agent", "session"};
	for (size_t i = 0; i < 2; i++) {
		snprintf(f, sizeof f, "%s/files/%s", d, FILES_SUBDIRS[i]);
		if ((mkdir(f, 0755) < 0 && errno != EEXIST) || chown(f, agent, agent) < 0)
			return -1;
	}
	snprintf(f, sizeof f, "%s/files", d);
	snprintf(t, sizeof t, "%s/files", root);
	if (chown(f, agent, agent) < 0 || mkdir(t, 0755) < 0 || mount(f, t, NULL, MS_BIND, NULL) < 0)
		return -1;
	return 0;
}

static int pivot(const char *root)
{
	if (chdir(root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0)
		return -1;
	/* The old root is stacked under the new one: detach it so nothing of the
	 * host's tree stays reachable from this namespace. */
	if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		return -1;
	return mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
}

#define STEP(expr, name) do { *what = (name); if ((expr) < 0) return -1; } while (0)

int sb_mounts_build_root(const sb_plan *p, const char *resolv, const char **what)
{
	const char *r = p->root_mnt;
	char f[600];
	/* Private first: nothing mounted from here on propagates to the host. */
	STEP(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), "make / private");
	STEP(mount("tmpfs", r, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m"), "root tmpfs");
	snprintf(f, sizeof f, "%s/usr", r);
	STEP(bind_ro("/usr", f, true), "bind /usr");
	for (size_t i = 0; i < sizeof RO_TOP / sizeof RO_TOP[0]; i++) {
		char h[64];
		snprintf(h, sizeof h, "/%s", RO_TOP[i]);
		STEP(mirror_host_path(r, h, RO_TOP[i]), "mirror /bin, /lib");
	}
	STEP(build_etc(r, resolv), "build /etc");
	STEP(build_dev(r), "build /dev");
	STEP(build_disk(r, p), "mount disk");
	snprintf(f, sizeof f, "%s/app", r);
	STEP(mkdir(f, 0755), "mkdir /app");
	snprintf(f, sizeof f, "%s/proc", r);
	STEP(mkdir(f, 0555), "mkdir /proc");
	/* hidepid: a program sees only processes of its own uid, not the keeper. */
	STEP(mount("proc", f, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible"), "mount /proc");
	STEP(pivot(r), "pivot_root");
	return 0;
}

/* tree is a detached copy of the image (open_tree by the runner): attaching it
 * into this namespace first is what lets overlay use it; a path through
 * /proc/self/fd into the host's namespace is refused (EINVAL). */
int sb_mounts_app(int tree, const char **what)
{
	const char *at = "/.sbx/lower";
	STEP(syscall(SYS_move_mount, tree, "", AT_FDCWD, at, MOVE_MOUNT_F_EMPTY_PATH), "attach app tree");
	struct mount_attr a = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_RDONLY };
	STEP(syscall(SYS_mount_setattr, AT_FDCWD, at, AT_RECURSIVE, &a, sizeof a), "app flags");
	STEP(mount("overlay", "/app", "overlay", MS_NOSUID | MS_NODEV,
	           "lowerdir=/.sbx/lower,upperdir=/.sbx/upper,workdir=/.sbx/work"), "overlay /app");
	/* The overlay (and /tmp) hold the disk and the image; the mount points
	 * themselves go away, so nothing but /app and /tmp reaches them. */
	STEP(umount2("/.sbx", MNT_DETACH), "detach disk");
	return 0;
}

/* mkdir -p of path on the root, one component at a time and never through a
 * link (the root holds /bin and /lib* links into /usr). */
static int make_dirs(const char *path)
{
	char comp[256];
	int dir = open("/", O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	for (const char *p = path + 1; dir >= 0 && *p;) {
		size_t n = strcspn(p, "/");
		if (n == 0 || n >= sizeof comp) {
			close(dir);
			errno = EINVAL;
			return -1;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		if (mkdirat(dir, comp, 0755) < 0 && errno != EEXIST) {
			close(dir);
			return -1;
		}
		int next = openat(dir, comp, O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		close(dir);
		dir = next;
		p += n + (p[n] == '/');
	}
	if (dir < 0)
		return -1;
	close(dir);
	return 0;
}

/* The root is read-only (pivot); its directories for the mount point are
 * made with the root writable for that moment only: no program runs yet. */
int sb_mounts_bind(int tree, const char *path, const char **what)
{
	unsigned long ro = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV;
	STEP(mount(NULL, "/", NULL, ro, NULL), "root writable");
	*what = "mkdir mount point";
	int rc = make_dirs(path);
	int e = errno;
	STEP(mount(NULL, "/", NULL, ro | MS_RDONLY, NULL), "root read-only");
	if (rc < 0) {
		errno = e;
		return -1;
	}
	STEP(syscall(SYS_move_mount, tree, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH), "attach bucket mount");
	return 0;
}

/* An allow-list's pinned names (egress.c): before any program runs. */
int sb_mounts_etc_net(const char *body, size_t blen, const char **what)
{
	const char *hosts = body, *end = body + blen;
	const char *nul = memchr(body, '\0', blen);
	const char *resolv = nul ? nul + 1 : NULL;
	*what = "bad /etc request";
	if (!resolv || resolv >= end || !memchr(resolv, '\0', (size_t)(end - resolv))) {
		errno = EINVAL;
		return -1;
	}
	unsigned long ro = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV;
	STEP(mount(NULL, "/", NULL, ro, NULL), "root writable");
	*what = "write /etc/hosts";
	int rc = put_file("/etc/hosts", hosts, 0644);
	if (rc == 0) {
		*what = "write /etc/resolv.conf";
		rc = put_file("/etc/resolv.conf", resolv, 0644);
	}
	int e = errno;
	STEP(mount(NULL, "/", NULL, ro | MS_RDONLY, NULL), "root read-only");
	errno = e;
	return rc;
}
