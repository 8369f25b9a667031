/* Path rules for untrusted trees (tarball entries, manifest fields, symlink
 * targets) and the file system chores of the pipeline: make a tree, make it
 * read-only, remove it. Every walk uses FTW_PHYS: the trees hold strangers'
 * symlinks, and following one would let a project chmod or delete host files. */
#include "deploy/deploy.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Calls fn(component, len, ctx) for each non-empty component of path. */
typedef int (*component_fn)(const char *c, size_t len, void *ctx);

static int each_component(const char *path, component_fn fn, void *ctx)
{
	const char *p = path;
	while (*p) {
		const char *e = strchr(p, '/');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len > 0) {
			int rc = fn(p, len, ctx);
			if (rc != 0)
				return rc;
		}
		if (!e)
			break;
		p = e + 1;
	}
	return 0;
}

static bool is_dotdot(const char *c, size_t len)
{
	return len == 2 && c[0] == '.' && c[1] == '.';
}

static bool is_dot(const char *c, size_t len)
{
	return len == 1 && c[0] == '.';
}

static int refuse_dotdot(const char *c, size_t len, void *ctx)
{
	(void)ctx;
	return is_dotdot(c, len) ? AH_EINVALID : 0;
}

int ah_deploy_path_check(const char *path)
{
	if (!path || !*path || path[0] == '/' || strlen(path) >= 4096)
		return AH_EINVALID;
	return each_component(path, refuse_dotdot, NULL);
}

/* Depth below the tree root while walking a path lexically; below zero means
 * the path left the tree. */
static int walk_depth(const char *c, size_t len, void *ctx)
{
	long *depth = ctx;
	if (is_dot(c, len))
		return 0;
	*depth += is_dotdot(c, len) ? -1 : 1;
	return *depth < 0 ? AH_EINVALID : 0;
}

int ah_deploy_link_check(const char *link_path, const char *target)
{
	if (ah_deploy_path_check(link_path) != 0 || !target || !*target || target[0] == '/')
		return AH_EINVALID;
	/* The link resolves relative to its own directory: start at that depth. */
	long depth = 0;
	const char *slash = strrchr(link_path, '/');
	if (slash) {
		char dir[4096];
		size_t n = (size_t)(slash - link_path);
		memcpy(dir, link_path, n);
		dir[n] = '\0';
		each_component(dir, walk_depth, &depth);
	}
	return each_component(target, walk_depth, &depth);
}

int ah_deploy_mkdirs(const char *dir, ah_err *err)
{
	char buf[4096];
	size_t n = strlen(dir);
	if (n == 0 || n >= sizeof(buf))
		return ah_err_set(err, AH_EFAIL, "bad directory path");
	memcpy(buf, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		char c = buf[i];
		buf[i] = '\0';
		if (mkdir(buf, 0700) != 0 && errno != EEXIST)
			return ah_err_set(err, AH_EFAIL, "cannot create %s: %s", buf, strerror(errno));
		buf[i] = c;
	}
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)f;
	if (flag == FTW_DP)
		return rmdir(path) != 0 && errno != ENOENT ? -1 : 0;
	return unlink(path) != 0 && errno != ENOENT ? -1 : 0;
}

/* A read-only directory cannot have entries removed: give write back first.
 * One that refuses ends this pass; the removal after it reports what stays. */
static int make_writable(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)f;
	if (flag == FTW_D && chmod(path, (st->st_mode & 07777) | S_IRWXU) != 0)
		return -1;
	return 0;
}

int ah_deploy_rmtree(const char *dir)
{
	struct stat st;
	if (lstat(dir, &st) != 0)
		return errno == ENOENT ? 0 : AH_EFAIL;
	if (!S_ISDIR(st.st_mode))
		return unlink(dir) == 0 ? 0 : AH_EFAIL;
	nftw(dir, make_writable, 64, FTW_PHYS | FTW_MOUNT);
	return nftw(dir, remove_entry, 64, FTW_PHYS | FTW_DEPTH | FTW_MOUNT) == 0 ? 0 : AH_EFAIL;
}

/* nftw has no context argument; one walk per thread at a time. */
static __thread long long tree_bytes;

static int add_size(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)path;
	(void)f;
	if (flag == FTW_F && S_ISREG(st->st_mode))
		tree_bytes += st->st_size;
	return 0;
}

int ah_deploy_tree_bytes(long long *out, const char *dir, ah_err *err)
{
	tree_bytes = 0;
	if (nftw(dir, add_size, 64, FTW_PHYS | FTW_MOUNT) != 0)
		return ah_err_set(err, AH_EFAIL, "cannot walk %s: %s", dir, strerror(errno));
	*out = tree_bytes;
	return 0;
}

static int drop_write(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)f;
	if (flag == FTW_SL || flag == FTW_SLN)
		return 0; /* chmod would follow it */
	return chmod(path, st->st_mode & 07555 & ~(mode_t)(S_ISUID | S_ISGID)) == 0 ? 0 : -1;
}

int ah_deploy_make_readonly(const char *dir, ah_err *err)
{
	if (nftw(dir, drop_write, 64, FTW_PHYS | FTW_MOUNT | FTW_DEPTH) != 0)
		return ah_err_set(err, AH_EFAIL, "cannot make the image read-only: %s",
		                  strerror(errno));
	return 0;
}

/* nftw has no context argument; a deploy runs on one thread at a time per
 * walk, so thread-local state is enough. */
static __thread int walk_root = -1;
static __thread size_t walk_prefix;
static __thread char *walk_bad;
static __thread size_t walk_bad_n;

static int check_link(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)f;
	if (flag != FTW_SL && flag != FTW_SLN)
		return 0;
	const char *rel = path + walk_prefix;
	struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_BENEATH};
	int fd = (int)syscall(SYS_openat2, walk_root, rel, &how, sizeof(how));
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	/* Dangling or looping links inside the tree are harmless; leaving it is not. */
	if (errno == EXDEV) {
		snprintf(walk_bad, walk_bad_n, "%s", rel);
		return 1;
	}
	return 0;
}

int ah_deploy_find_escaping_link(char *out, size_t n, const char *dir)
{
	int rootfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return -1;
	walk_root = rootfd;
	walk_prefix = strlen(dir) + 1;
	walk_bad = out;
	walk_bad_n = n;
	out[0] = '\0';
	int r = nftw(dir, check_link, 32, FTW_PHYS | FTW_MOUNT);
	close(rootfd);
	return r == 1 ? 1 : r == 0 ? 0 : -1;
}
