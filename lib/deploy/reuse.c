/* A redeploy whose dependencies did not change takes the agent's previous
 * node_modules instead of running npm again (issue 27: the Claude Agent
 * SDK's tree is 450 MB, fetched on every deploy).
 *
 * "Did not change" is a fingerprint of what decides the tree: the lockfile
 * (package-lock.json or npm-shrinkwrap.json; package.json when there is
 * none), node's binary and the machine. The runner writes it beside each
 * image it built (<image>.deps, in data_dir, which no tenant can write),
 * and a later deploy of the same agent whose fingerprint matches links the
 * previous image's node_modules into the new project (hard links: the new
 * image costs no bytes, and removing the old image later only drops its
 * names). Only the agent's own previous image is ever used, so nothing of
 * another tenant's build is trusted. Not taken when the project brings its
 * own node_modules, or its package.json has install scripts of its own
 * (preinstall, install, postinstall, prepare): those may write anywhere in
 * /app, which a copy of node_modules would not repeat. */
#include "deploy/deploy.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
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

static bool read_note(const char *image_dir, char out[65])
{
	char p[4096];
	snprintf(p, sizeof p, "%s.deps", image_dir);
	FILE *f = fopen(p, "re");
	if (!f)
		return false;
	bool ok = fgets(out, 65, f) != NULL && strlen(out) == 64;
	fclose(f);
	return ok;
}

void ah_deps_note(const char *image_dir, const char *fingerprint)
{
	char p[4096];
	snprintf(p, sizeof p, "%s.deps", image_dir);
	FILE *f = fopen(p, "we");
	if (!f || fputs(fingerprint, f) < 0 || fclose(f) != 0)
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

bool ah_deps_reuse(const char *project_dir, const char *prev_image, const char *fingerprint,
                   const char *log_tag)
{
	char note[65], from[4096], to[4096];
	struct stat sb;
	if (!prev_image || !read_note(prev_image, note) || strcmp(note, fingerprint) != 0)
		return false;
	snprintf(from, sizeof from, "%s/node_modules", prev_image);
	snprintf(to, sizeof to, "%s/node_modules", project_dir);
	if (lstat(from, &sb) != 0 || !S_ISDIR(sb.st_mode) || lstat(to, &sb) == 0 ||
	    has_install_scripts(project_dir))
		return false;
	if (link_tree(from, to) != 0) {
		ah_log_warn("%s: could not link the previous node_modules; running npm", log_tag);
		ah_deploy_rmtree(to);
		return false;
	}
	ah_log_info("%s: dependencies unchanged (%.12s): the previous image's node_modules, "
	            "linked, without npm", log_tag, fingerprint);
	return true;
}
