/* Making an agent's image. npm runs the project's install scripts, i.e.
 * strangers' code, so it only ever runs inside a sandbox: the project is the
 * lower layer of the sandbox's /app, everything npm writes (node_modules, its
 * cache and HOME under /tmp) goes to the sandbox's own size-capped disk, the
 * network is the sandbox's (outbound NAT only), and limits and a deadline
 * apply. Nothing the build writes is ever a file on the host: the runner reads
 * /app back as a tar stream and extracts it as it extracts an upload (tarball.c),
 * so the image is root's, without setuid bits, devices or links that leave it,
 * and no larger than image_max_bytes, whatever an install script left. */
#include "deploy/deploy.h"
#include "core/log.h"
#include "sandbox/sandbox.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TAIL_CHARS 600
/* A tar stream holds more than its files: a 512-byte header per entry, each
 * file padded to 512 bytes. Extraction checks the image's real size. */
#define TAR_OVERHEAD(max) ((max) / 4 + (64LL << 20))

static bool is_file(const char *dir, const char *name)
{
	char p[4096];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return lstat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The last TAIL_CHARS of npm's output on one line, whitespace runs collapsed,
 * without npm's closing pointer to a debug log the user cannot read. */
static void output_tail(char *out, size_t n, const ah_sandbox_result *r)
{
	const char *src = r->err_tail && *r->err_tail ? r->err_tail : r->out ? r->out : "";
	const char *noise = strstr(src, "npm error A complete log of this run");
	if (!noise)
		noise = strstr(src, "npm ERR! A complete log of this run");
	size_t len = noise ? (size_t)(noise - src) : strlen(src);
	const char *end = src + len;
	if (len > TAIL_CHARS)
		src = end - TAIL_CHARS;
	size_t o = 0;
	bool space = true; /* also trims leading whitespace */
	for (; src < end && o + 1 < n; src++) {
		unsigned char c = (unsigned char)*src;
		if (isspace(c) || iscntrl(c)) {
			if (!space)
				out[o++] = ' ';
			space = true;
			continue;
		}
		out[o++] = (char)c;
		space = false;
	}
	while (o > 0 && out[o - 1] == ' ')
		o--;
	out[o] = '\0';
}

static int judge(const ah_sandbox_result *r, const struct ah_build_opts *opts, ah_err *err)
{
	char tail[TAIL_CHARS + 1];
	/* Each limit by its setting's name: the user asks the operator for it. */
	if (r->timed_out)
		return ah_err_set(err, AH_EINVALID, "Dependency installation failed: timed out after %d s "
		                  "(deploy_timeout_seconds)", opts->timeout_seconds);
	if (r->oom_killed)
		return ah_err_set(err, AH_EINVALID, "Dependency installation failed: out of memory "
		                  "(sandbox_memory_mb)");
	if (r->exit_code == 0)
		return 0;
	output_tail(tail, sizeof(tail), r);
	if (strstr(tail, "ENOSPC") || strstr(tail, "No space left on device"))
		return ah_err_set(err, AH_EINVALID, "Dependency installation failed: the build's disk "
		                  "is full (%lld MB, build_disk_mb): %s", opts->disk_bytes >> 20, tail);
	/* The network's fault, not the project's: worth another attempt. */
	static const char *const transient[] = {"EAI_AGAIN", "ETIMEDOUT", "ECONNRESET",
	                                        "ECONNREFUSED", "ENETUNREACH", "ENOTFOUND"};
	for (size_t i = 0; i < sizeof(transient) / sizeof(transient[0]); i++)
		if (strstr(tail, transient[i]))
			return ah_err_set(err, AH_EFAIL, "Dependency installation failed: %s", tail);
	if (r->exit_code < 0)
		return ah_err_set(err, AH_EINVALID, "Dependency installation failed: npm killed by "
		                  "signal %d: %s", r->signal, tail);
	return ah_err_set(err, AH_EINVALID, "Dependency installation failed: %s",
	                  *tail ? tail : "npm exited with an error and no output");
}

#define SHARED_CACHE "/app/" AH_NPM_CACHE_NAME

static int run_npm(ah_sandbox *sb, const char *project_dir, bool shared_cache,
                   const struct ah_build_opts *opts, ah_err *err)
{
	bool lock = is_file(project_dir, "package-lock.json") ||
	            is_file(project_dir, "npm-shrinkwrap.json");
	const char *argv[] = {"/usr/bin/npm", lock ? "ci" : "install", "--omit=dev",
	                      "--no-audit", "--no-fund", NULL};
	const char *envp[] = {
		"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp/home",
		shared_cache ? "npm_config_cache=" SHARED_CACHE : "npm_config_cache=/tmp/npm-cache",
		"npm_config_update_notifier=false", "npm_config_loglevel=warn", "NODE_ENV=production",
		"LANG=C.UTF-8", NULL,
	};
	ah_sandbox_result res = {0};
	ah_err sberr = {0};
	ah_log_info("%s: npm %s in sandbox %s", opts->log_tag, argv[1], ah_sandbox_id(sb));
	ah_deploy_say(opts->output, opts->output_ctx, "==> npm %s --omit=dev --no-audit --no-fund",
	              argv[1]);
	ah_sandbox_exec_spec x = {
		.argv = argv, .envp = envp, .timeout_ms = opts->timeout_seconds * 1000,
		.max_output = 4 << 20, .log_tag = opts->log_tag, .cwd = "/app",
		.on_output = opts->output, .output_ctx = opts->output_ctx, /* npm and install scripts */
	};
	int rc = ah_sandbox_exec(sb, &x, &res, &sberr);
	if (rc == 0)
		rc = judge(&res, opts, err);
	else
		rc = ah_err_set(err, AH_EFAIL, "The build sandbox failed: %s", sberr.msg);
	ah_sandbox_result_free(&res);
	return rc;
}

/* /app as a plain tar into fd. Holes are read as zeros (no --sparse): a huge
 * sparse file costs the stream its full size and meets the cap. */
static int read_back(ah_sandbox *sb, int fd, const struct ah_build_opts *opts, ah_err *err)
{
	const char *argv[] = {"/usr/bin/tar", "--create", "--file=-", "--directory=/app",
	                      "--one-file-system", "--anchored", "--exclude=./" AH_NPM_CACHE_NAME,
	                      ".", NULL};
	const char *envp[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL};
	ah_sandbox_result res = {0};
	ah_err sberr = {0};
	ah_sandbox_exec_spec x = {
		.argv = argv, .envp = envp, .timeout_ms = opts->timeout_seconds * 1000,
		.max_output = (size_t)(opts->image_max_bytes + TAR_OVERHEAD(opts->image_max_bytes)),
		.log_tag = opts->log_tag, .cwd = "/", .stdout_to_fd = true, .stdout_fd = fd,
	};
	int rc = ah_sandbox_exec(sb, &x, &res, &sberr);
	if (rc != 0)
		rc = ah_err_set(err, AH_EFAIL, "The build sandbox failed: %s", sberr.msg);
	else if (res.output_truncated)
		rc = ah_err_set(err, AH_ETOOBIG, "The built image is larger than %lld MB (image_max_mb)",
		                opts->image_max_bytes >> 20);
	else if (res.timed_out || res.exit_code != 0)
		rc = ah_err_set(err, AH_EINVALID, "Could not read the built image back: %s",
		                res.err_tail && *res.err_tail ? res.err_tail : "tar failed");
	ah_sandbox_result_free(&res);
	return rc;
}

/* The tar stream becomes the image, through the upload's checks. */
static int unpack(const char *tar, const char *image_dir, const struct ah_build_opts *opts,
                  ah_err *err)
{
	struct ah_tar_limits lim = AH_TAR_LIMITS_DEFAULT;
	lim.max_compressed = opts->image_max_bytes + TAR_OVERHEAD(opts->image_max_bytes);
	lim.max_extracted = opts->image_max_bytes;
	lim.uncompressed = true;
	lim.noun = "The built image";
	lim.refused = "The built image was refused";
	if (mkdir(image_dir, 0700) != 0)
		return ah_err_set(err, AH_EFAIL, "cannot create %s: %s", image_dir, strerror(errno));
	int rc = ah_tarball_extract(tar, image_dir, &lim, err);
	if (rc == AH_ETOOBIG) /* name the setting, as read_back does */
		rc = ah_err_set(err, rc, "The built image is larger than %lld MB (image_max_mb)",
		                opts->image_max_bytes >> 20);
	if (rc != 0)
		ah_deploy_rmtree(image_dir);
	return rc;
}

/* The tarballs this build's npm added to the shared cache's view (newer
 * than its start), read out as a tar stream and checked one by one by
 * npm_cache.c. Whatever fails here only costs the next build a download. */
static void harvest(ah_sandbox *sb, time_t started, const char *scratch,
                    const struct ah_build_opts *opts)
{
	char since[48], tar[4200], dir[4200];
	snprintf(since, sizeof since, "--newer-mtime=@%lld", (long long)started - 2);
	snprintf(tar, sizeof tar, "%s.npm", scratch);
	snprintf(dir, sizeof dir, "%s.npm.d", scratch);
	const char *argv[] = {"/usr/bin/tar", "--create", "--file=-",
	                      "--directory=" SHARED_CACHE "/_cacache", since, "content-v2/sha512", NULL};
	const char *envp[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL};
	ah_sandbox_result res = {0};
	ah_err e = {0};
	int fd = open(tar, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ah_sandbox_exec_spec x = {
		.argv = argv, .envp = envp, .timeout_ms = opts->timeout_seconds * 1000,
		.max_output = (size_t)(opts->image_max_bytes + TAR_OVERHEAD(opts->image_max_bytes)),
		.log_tag = opts->log_tag, .cwd = "/", .stdout_to_fd = true, .stdout_fd = fd,
	};
	struct ah_tar_limits lim = AH_TAR_LIMITS_DEFAULT;
	lim.max_compressed = (long long)x.max_output;
	lim.max_extracted = opts->image_max_bytes;
	lim.uncompressed = true;
	bool ok = fd >= 0 && ah_sandbox_exec(sb, &x, &res, &e) == 0 && res.exit_code == 0 &&
	          !res.output_truncated && !res.timed_out;
	if (fd >= 0)
		close(fd);
	ah_sandbox_result_free(&res);
	struct ah_npm_harvest h = {0};
	if (ok && mkdir(dir, 0700) == 0 && ah_tarball_extract(tar, dir, &lim, &e) == 0)
		ah_npm_cache_harvest(opts->npm_cache, dir, opts->log_tag, &h);
	if (h.added || h.known || h.refused)
		ah_deploy_say(opts->output, opts->output_ctx, "==> npm cache: %lld downloaded tarball(s) "
		              "checked and kept for later builds, %lld already kept, %lld refused",
		              h.added, h.known, h.refused);
	unlink(tar);
	ah_deploy_rmtree(dir);
}

static int build_in_sandbox(const char *project_dir, const char *image_dir, const char *scratch,
                            const struct ah_build_opts *opts, ah_err *err)
{
	bool shared = opts->npm_cache &&
	              ah_npm_cache_offer(opts->npm_cache, project_dir, opts->log_tag) == 0;
	ah_sandbox *sb = NULL;
	ah_sandbox_spec spec = {.image_dir = project_dir, .build = true, .disk_bytes = opts->disk_bytes};
	ah_err sberr = {0};
	int rc = ah_sandbox_create(&sb, &spec, &sberr);
	if (rc == AH_EBUSY) /* the host's budget, not the project: wait for room */
		return ah_err_set(err, AH_EBUSY, "Waiting for room on the build host (its sandbox "
		                  "memory or disk budget is in use)");
	if (rc != 0) /* the machine's fault: worth a retry */
		return ah_err_set(err, AH_EFAIL, "Could not start the build sandbox: %s", sberr.msg);
	int fd = -1;
	time_t started = time(NULL);
	rc = run_npm(sb, project_dir, shared, opts, err);
	if (rc == 0 && shared)
		harvest(sb, started, scratch, opts);
	if (rc == 0 && (fd = open(scratch, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
		rc = ah_err_set(err, AH_EFAIL, "cannot create %s: %s", scratch, strerror(errno));
	if (rc == 0)
		rc = read_back(sb, fd, opts, err);
	if (fd >= 0)
		close(fd);
	ah_sandbox_destroy(sb);
	if (rc == 0)
		rc = unpack(scratch, image_dir, opts, err);
	unlink(scratch);
	return rc;
}

/* No build: the fetched project is the image, once its size is known. */
static int take_as_is(const char *project_dir, const char *image_dir,
                      const struct ah_build_opts *opts, ah_err *err)
{
	long long bytes = 0;
	int rc = ah_deploy_tree_bytes(&bytes, project_dir, err);
	if (rc == 0 && bytes > opts->image_max_bytes)
		rc = ah_err_set(err, AH_ETOOBIG, "The image is larger than %lld MB (image_max_mb)",
		                opts->image_max_bytes >> 20);
	if (rc == 0 && rename(project_dir, image_dir) != 0)
		rc = ah_err_set(err, AH_EFAIL, "cannot move the image into place: %s", strerror(errno));
	return rc;
}

/* Two images of one agent: <data_dir>/images/<agent>/<job>, same parent. */
static bool same_agent(const char *a, const char *b)
{
	const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
	return sa && sb && sa - a == sb - b && strncmp(a, b, (size_t)(sa - a)) == 0;
}

int ah_build_image(const char *project_dir, const char *image_dir, const char *scratch_file,
                   const struct ah_build_opts *opts, ah_err *err)
{
	if (opts->cancel && *opts->cancel)
		return ah_err_set(err, AH_EFAIL, "Deploy cancelled (runner shutting down)");
	if (!is_file(project_dir, "package.json")) {
		ah_deploy_say(opts->output, opts->output_ctx, "==> no package.json: nothing to install");
		return take_as_is(project_dir, image_dir, opts, err);
	}
	char fp[65];
	bool known = ah_deps_fingerprint(project_dir, fp) == 0;
	const char *from = known ? ah_deps_reuse(project_dir, opts->reuse_from, fp, opts->log_tag)
	                         : NULL;
	if (from && same_agent(from, image_dir))
		ah_deploy_say(opts->output, opts->output_ctx,
		              "==> dependencies unchanged since the last deploy: its node_modules reused, npm not run");
	else if (from)
		ah_deploy_say(opts->output, opts->output_ctx, "==> dependencies unchanged from another "
		              "of your agents' images: its node_modules reused, npm not run");
	int rc = from ? take_as_is(project_dir, image_dir, opts, err)
	              : build_in_sandbox(project_dir, image_dir, scratch_file, opts, err);
	if (rc == 0 && known)
		ah_deps_note(image_dir, fp);
	if (rc == 0 && from) { /* the same tree: its packed form too (ah_image_pack) */
		char part[4200], to[4200];
		ah_deps_part_path(part, sizeof part, from);
		ah_deps_part_path(to, sizeof to, image_dir);
		if (link(part, to) != 0 && errno != ENOENT)
			ah_log_warn("%s: cannot link %s: %s", opts->log_tag, part, strerror(errno));
		char sha_from[4300], sha_to[4300]; /* and the hash state after it (ah_image_pack_sha256) */
		snprintf(sha_from, sizeof sha_from, "%s.sha", part);
		snprintf(sha_to, sizeof sha_to, "%s.sha", to);
		if (link(sha_from, sha_to) != 0 && errno != ENOENT)
			ah_log_warn("%s: cannot link %s: %s", opts->log_tag, sha_from, strerror(errno));
	}
	return rc;
}
