/* The host-wide npm download cache (issue 27: a second agent on the Claude
 * Agent SDK downloaded its 222 MB of tarballs again).
 *
 * <data_dir>/npm-cache/content-v2/sha512/<aa>/<bb>/<rest> holds package
 * tarballs under the name cacache gives them: the hex SHA-512 of their bytes.
 * It only ever holds files the runner itself checked against that name, so
 * one tenant's build cannot put bytes there that another's asks for by a
 * different hash. What npm reads from it is by digest only: with a lockfile
 * (or a registry manifest) npm knows each tarball's integrity and resolved
 * URL, and pacote asks cacache for the content of that digest, which cacache
 * hashes again while reading (a mismatch is EINTEGRITY: npm drops the entry
 * and downloads it). No index entries (npm's HTTP cache: packuments, keys to
 * digests) are ever shared: those are what another tenant could lie in.
 *
 * Before npm runs, the cache's content is hard-linked into the project, at
 * /app/.agenthost-npm-cache, npm's cache in the build (npm_config_cache):
 * the build sees those files through its overlay's lower layer, so whatever
 * it writes (a new tarball, an install script's rm or chmod) goes to its own
 * upper layer and never to the shared inodes. After a build that succeeded,
 * the tarballs it added (newer than its start) are read back as a tar stream
 * into a scratch directory, each one hashed and compared with its name, and
 * only matching ones are moved into the cache. The image never holds the
 * cache (the read-back of /app excludes it). */
#include "deploy/deploy.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static __thread const char *walk_cache, *walk_root;
static __thread long long walk_added, walk_known, walk_refused;

int ah_npm_cache_offer(const char *cache_dir, const char *project_dir, const char *log_tag)
{
	char from[4200], to[4200], parent[4300];
	struct stat st;
	snprintf(to, sizeof to, "%s/" AH_NPM_CACHE_NAME, project_dir);
	ah_deploy_rmtree(to); /* the project's own, if it brought one: not trusted */
	snprintf(from, sizeof from, "%s/content-v2", cache_dir);
	snprintf(parent, sizeof parent, "%s/_cacache", to);
	if (mkdir(to, 0755) != 0 || mkdir(parent, 0755) != 0)
		return -1;
	if (lstat(from, &st) != 0 || !S_ISDIR(st.st_mode))
		return 0; /* empty cache: npm downloads */
	snprintf(parent, sizeof parent, "%s/_cacache/content-v2", to);
	const char *argv[] = {"/bin/cp", "-a", "--link", "--no-target-directory", from, parent, NULL};
	if (ah_deploy_run_prog(argv) != 0) {
		ah_log_warn("%s: could not offer the npm cache; npm downloads", log_tag);
		ah_deploy_rmtree(parent);
	}
	return 0;
}

static int sha512_file(const char *path, char out[129])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	crypto_hash_sha512_state st;
	unsigned char h[crypto_hash_sha512_BYTES], buf[1 << 16];
	ssize_t n;
	crypto_hash_sha512_init(&st);
	while ((n = read(fd, buf, sizeof buf)) > 0)
		crypto_hash_sha512_update(&st, buf, (size_t)n);
	close(fd);
	crypto_hash_sha512_final(&st, h);
	sodium_bin2hex(out, 129, h, sizeof h);
	return n == 0 ? 0 : -1;
}

/* Package tarballs are gzip'd; npm's HTTP cache also keeps registry
 * metadata in content-v2 (reachable only through its index, never shared),
 * which has no business in the shared cache. */
static bool is_gzip(const char *path)
{
	unsigned char m[2] = {0};
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	bool gz = fd >= 0 && read(fd, m, 2) == 2 && m[0] == 0x1f && m[1] == 0x8b;
	if (fd >= 0)
		close(fd);
	return gz;
}

static int mkdirs_0755(char *path)
{
	for (char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		int rc = mkdir(path, 0755);
		*p = '/';
		if (rc != 0 && errno != EEXIST)
			return -1;
	}
	return 0;
}

/* <root>/content-v2/sha512/aa/bb/<124 hex>: the digest it claims, or false. */
static bool claimed_digest(const char *path, char out[129])
{
	size_t rl = strlen(walk_root);
	if (strncmp(path, walk_root, rl) != 0 || strncmp(path + rl, "/content-v2/sha512/", 19) != 0)
		return false;
	const char *p = path + rl + 19;
	if (strlen(p) != 2 + 1 + 2 + 1 + 124 || p[2] != '/' || p[5] != '/')
		return false;
	snprintf(out, 129, "%.2s%.2s%s", p, p + 3, p + 6);
	for (const char *c = out; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			return false;
	return true;
}

static int harvest_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)f;
	char claimed[129], got[129], dest[4400];
	if (flag != FTW_F || !S_ISREG(st->st_mode) || !claimed_digest(path, claimed) || !is_gzip(path))
		return 0;
	snprintf(dest, sizeof dest, "%s/content-v2/sha512/%.2s/%.2s/%s", walk_cache, claimed,
	         claimed + 2, claimed + 4);
	struct stat ds;
	/* Already there, checked when it came, yet downloaded again: npm found
	 * it did not match (a bad disk?), and the checked new one replaces it. */
	bool known = lstat(dest, &ds) == 0;
	if (known && sha512_file(dest, got) == 0 && strcmp(got, claimed) == 0) {
		walk_known++;
		return 0;
	}
	if (sha512_file(path, got) != 0 || strcmp(got, claimed) != 0) {
		walk_refused++;
		return 0;
	}
	/* Dated 1970: a build reads back only what is newer than its start. */
	const struct timespec epoch[2] = {{1, 0}, {1, 0}};
	if (chmod(path, 0444) == 0 && utimensat(AT_FDCWD, path, epoch, AT_SYMLINK_NOFOLLOW) == 0 &&
	    mkdirs_0755(dest) == 0 && rename(path, dest) == 0)
		*(known ? &walk_known : &walk_added) += 1;
	return 0;
}

void ah_npm_cache_harvest(const char *cache_dir, const char *scratch_dir, const char *log_tag,
                          struct ah_npm_harvest *out)
{
	*out = (struct ah_npm_harvest){0};
	if (mkdir(cache_dir, 0700) != 0 && errno != EEXIST)
		return;
	walk_cache = cache_dir;
	walk_root = scratch_dir;
	walk_added = walk_known = walk_refused = 0;
	nftw(scratch_dir, harvest_one, 32, FTW_PHYS | FTW_MOUNT);
	out->added = walk_added;
	out->known = walk_known;
	out->refused = walk_refused;
	if (walk_added || walk_known || walk_refused)
		ah_log_info("%s: npm cache: %lld new tarball(s) added, %lld already there, %lld refused "
		            "(not named by their SHA-512)", log_tag, walk_added, walk_known, walk_refused);
}
