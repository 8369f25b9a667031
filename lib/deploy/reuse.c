/* A deploy whose dependencies are those of an image already built takes
 * that image's node_modules instead of running npm again (issue 27: the
 * Claude Agent SDK's tree is 450 MB, fetched and unpacked on every deploy).
 *
 * "The same dependencies" is a fingerprint of what decides the tree: the
 * lockfile (package-lock.json or npm-shrinkwrap.json; package.json when there
 * is none), the project's .npmrc, node's binary and the machine. The runner writes it beside each
 * image it built (<image>.deps, in data_dir, which no tenant can write), with
 * the count of node_modules' entries, and a later deploy whose fingerprint
 * matches links that image's node_modules into the new project (hard links:
 * the new image costs no bytes, and removing the other image later only drops
 * its names). The images tried are the agent's own previous one, then its
 * owner's other agents' current ones (runner/deploy_job.c): a tenant trusts
 * its own install output, never another tenant's (whose install scripts could
 * have changed its tree). A tree whose own package.json has install scripts
 * (preinstall, install, postinstall, prepare) is never noted, nor taken into
 * such a project: those may write anywhere in /app, which a copy of
 * node_modules would not repeat.
 *
 * Another agent's image can be retired while it is being linked from; the
 * copy is taken only when it holds as many entries as the note says (a
 * removal only ever takes entries away), else npm runs. */
#include "deploy/deploy.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <json-c/json.h>
#include <sodium.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define FILE_CAP (64 << 20) /* a lockfile larger than this is not fingerprinted */

static int hash_file(crypto_hash_sha256_state *st, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	char buf[65536];
	ssize_t n;
	long long total = 0;
	while ((n = read(fd, buf, sizeof buf)) > 0 && (total += n) <= FILE_CAP)
		crypto_hash_sha256_update(st, (const unsigned char *)buf, (size_t)n);
	close(fd);
	return n == 0 ? 0 : -1;
}

int ah_deps_fingerprint(const char *project_dir, char out[65])
{
	static const char *const decides[] = {"npm-shrinkwrap.json", "package-lock.json", "package.json"};
	crypto_hash_sha256_state st;
	crypto_hash_sha256_init(&st);
	char p[4096];
	struct stat sb;
	int rc = -1;
	for (size_t i = 0; i < 3 && rc != 0; i++) {
		snprintf(p, sizeof p, "%s/%s", project_dir, decides[i]);
		if (lstat(p, &sb) == 0 && S_ISREG(sb.st_mode)) {
			crypto_hash_sha256_update(&st, (const unsigned char *)decides[i], strlen(decides[i]) + 1);
			rc = hash_file(&st, p);
		}
	}
	/* The project's npm settings (omit=optional drops Claude Code's binary). */
	snprintf(p, sizeof p, "%s/.npmrc", project_dir);
	if (rc == 0 && lstat(p, &sb) == 0) {
		crypto_hash_sha256_update(&st, (const unsigned char *)".npmrc", 7);
		rc = S_ISREG(sb.st_mode) ? hash_file(&st, p) : -1;
	}
	/* node's binary (an upgrade changes its size or time) and the machine:
	 * native modules are built for both. */
	struct utsname u;
	char extra[512];
	if (rc == 0 && stat("/usr/bin/node", &sb) == 0 && uname(&u) == 0) {
		int n = snprintf(extra, sizeof extra, "node %lld %lld.%09ld %llu|%s %s",
		                 (long long)sb.st_size, (long long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec,
		                 (unsigned long long)sb.st_ino, u.sysname, u.machine);
		crypto_hash_sha256_update(&st, (const unsigned char *)extra, (size_t)n);
	} else {
		rc = -1;
	}
	unsigned char h[crypto_hash_sha256_BYTES];
	crypto_hash_sha256_final(&st, h);
	sodium_bin2hex(out, 65, h, sizeof h);
	return rc;
}

/* The fingerprint and entry count an image's note records. */
static bool read_note(const char *image_dir, char out[65], long long *entries)
{
	char p[4096], line[128];
	snprintf(p, sizeof p, "%s.deps", image_dir);
	FILE *f = fopen(p, "re");
	if (!f)
		return false;
	bool ok = fgets(line, sizeof line, f) != NULL && strlen(line) == 65 && line[64] == '\n' &&
	          fscanf(f, "%lld", entries) == 1 && *entries > 0;
	fclose(f);
	snprintf(out, 65, "%.64s", line);
	return ok;
}

static __thread long long walk_entries;

static int count_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)path, (void)st, (void)flag, (void)f;
	walk_entries++;
	return 0;
}

/* Entries (files, directories, links) under dir and itself; -1 on error. */
static long long count_entries(const char *dir)
{
	walk_entries = 0;
	return nftw(dir, count_one, 32, FTW_PHYS | FTW_MOUNT) == 0 ? walk_entries : -1;
}

static bool has_install_scripts(const char *project_dir);

void ah_deps_note(const char *image_dir, const char *fingerprint)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/node_modules", image_dir);
	long long n = count_entries(p);
	if (n <= 0 || has_install_scripts(image_dir))
		return; /* nothing to take, or not the lockfile's tree alone */
	snprintf(p, sizeof p, "%s.deps", image_dir);
	FILE *f = fopen(p, "we");
	if (!f || fprintf(f, "%s\n%lld\n", fingerprint, n) < 0 || fclose(f) != 0)
		ah_log_warn("cannot write %s: %s (the next deploy runs npm)", p, strerror(errno));
}

void ah_deps_part_path(char *out, size_t n, const char *image_dir)
{
	snprintf(out, n, "%s.deps.tzst", image_dir);
}

void ah_deps_forget(const char *image_dir)
{
	char p[4200];
	snprintf(p, sizeof p, "%s.deps", image_dir);
	unlink(p);
	ah_deps_part_path(p, sizeof p, image_dir);
	unlink(p);
	snprintf(p, sizeof p, "%s.deps.tzst.sha", image_dir); /* its hash state (pack.c) */
	unlink(p);
}

/* The root package's own install scripts, which run with /app as cwd. */
static bool has_install_scripts(const char *project_dir)
{
	static const char *const hooks[] = {"preinstall", "install", "postinstall", "prepare"};
	char p[4096];
	snprintf(p, sizeof p, "%s/package.json", project_dir);
	json_object *pkg = json_object_from_file(p), *scripts = NULL;
	bool found = pkg == NULL; /* unreadable: do not take the shortcut */
	if (pkg && json_object_object_get_ex(pkg, "scripts", &scripts) &&
	    json_object_is_type(scripts, json_type_object))
		for (size_t i = 0; i < 4; i++)
			found = found || json_object_object_get_ex(scripts, hooks[i], NULL);
	json_object_put(pkg);
	return found;
}

/* A helper program run to its end: 0 when it exited 0, else -1 (deploy.h). */
int ah_deploy_run_prog(const char *const argv[])
{
	pid_t pid;
	int st;
	if (posix_spawn(&pid, argv[0], NULL, NULL, (char *const *)argv, environ) != 0)
		return -1;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* cp -a --link: directories made anew, files linked, links copied. */
static int link_tree(const char *from, const char *to)
{
	const char *argv[] = {"/bin/cp", "-a", "--link", "--no-target-directory", from, to, NULL};
	return ah_deploy_run_prog(argv);
}

/* image's node_modules linked into project_dir, whole; false leaves none. */
static bool take_from(const char *project_dir, const char *image, const char *fingerprint,
                      const char *log_tag)
{
	char note[65], from[4096], to[4096];
	long long entries = 0;
	struct stat sb;
	if (!read_note(image, note, &entries) || strcmp(note, fingerprint) != 0)
		return false;
	snprintf(from, sizeof from, "%s/node_modules", image);
	snprintf(to, sizeof to, "%s/node_modules", project_dir);
	if (lstat(from, &sb) != 0 || !S_ISDIR(sb.st_mode))
		return false;
	if (link_tree(from, to) == 0 && count_entries(to) == entries)
		return true;
	ah_log_warn("%s: could not link all of %s (retired meanwhile?)", log_tag, from);
	ah_deploy_rmtree(to);
	return false;
}

const char *ah_deps_reuse(const char *project_dir, const char *const *images,
                          const char *fingerprint, const char *log_tag)
{
	char to[4096];
	struct stat sb;
	snprintf(to, sizeof to, "%s/node_modules", project_dir);
	if (!images || lstat(to, &sb) == 0 || has_install_scripts(project_dir))
		return NULL;
	for (; *images; images++)
		if (take_from(project_dir, *images, fingerprint, log_tag)) {
			ah_log_info("%s: dependencies unchanged (%.12s): %s's node_modules, linked, "
			            "without npm", log_tag, fingerprint, *images);
			return *images;
		}
	return NULL;
}
