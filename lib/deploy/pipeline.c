/* One deploy attempt as a flat, ordered list of steps: fetch the code into a
 * scratch directory, find the project root, check the manifest, make the
 * image (dependencies installed in a sandbox: build.c) and make it read-only. Each step
 * reports in the log with the job's tag; the first failure ends the attempt. */
#include "deploy/deploy.h"
#include "core/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A URL for the log: user:password@ in it would be a secret in a log line. */
static void redact_url(char *out, size_t n, const char *url)
{
	const char *scheme = strstr(url, "://");
	const char *host = scheme ? scheme + 3 : url;
	const char *at = strchr(host, '@');
	const char *slash = strchr(host, '/');
	if (scheme && at && (!slash || at < slash))
		snprintf(out, n, "%.*s***@%s", (int)(host - url), url, at + 1);
	else
		snprintf(out, n, "%s", url);
}

void ah_deploy_say(ah_deploy_output_fn fn, void *ctx, const char *fmt, ...)
{
	char line[1200];
	va_list ap;
	if (!fn)
		return;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	size_t len = (size_t)n < sizeof(line) - 2 ? (size_t)n : sizeof(line) - 2;
	line[len++] = '\n';
	fn(ctx, line, len);
}

#define SAY(req, ...) ah_deploy_say((req)->build.output, (req)->build.output_ctx, __VA_ARGS__)

static int fetch(char *root, size_t n, const struct ah_deploy_req *req, ah_err *err)
{
	char src[4096];
	snprintf(src, sizeof(src), "%s/src", req->work_dir);
	if (req->from_git) {
		char shown[512];
		redact_url(shown, sizeof(shown), req->git_url ? req->git_url : "");
		ah_log_info("%s: cloning %s (%s)", req->log_tag, shown,
		            req->git_branch && *req->git_branch ? req->git_branch : "default branch");
		SAY(req, "==> cloning %s (%s)", shown,
		    req->git_branch && *req->git_branch ? req->git_branch : "default branch");
		int rc = ah_git_fetch(req->git_url, req->git_branch, src, &req->git, err);
		snprintf(root, n, "%s", src);
		if (rc == 0 && req->git.commit_out && req->git.commit_out[0])
			SAY(req, "==> checked out commit %s", req->git.commit_out);
		return rc;
	}
	ah_log_info("%s: extracting uploaded code", req->log_tag);
	SAY(req, "==> extracting the uploaded code");
	int rc = ah_deploy_mkdirs(src, err);
	if (rc == 0)
		rc = ah_tarball_extract(req->tarball, src, &req->tar, err);
	if (rc == 0)
		rc = ah_tarball_project_root(root, n, src, err);
	return rc;
}

static int place_image(const char *root, const struct ah_deploy_req *req, ah_err *err)
{
	char parent[4096], scratch[4096];
	snprintf(parent, sizeof(parent), "%s", req->image_dir);
	char *slash = strrchr(parent, '/');
	if (slash)
		*slash = '\0';
	snprintf(scratch, sizeof(scratch), "%s/image.tar", req->work_dir);
	int rc = ah_deploy_mkdirs(parent, err);
	if (rc == 0)
		rc = ah_build_image(root, req->image_dir, scratch, &req->build, err);
	if (rc == 0 && (rc = ah_deploy_make_readonly(req->image_dir, err)) != 0) {
		ah_deploy_rmtree(req->image_dir);
		ah_deps_forget(req->image_dir);
	}
	if (rc == 0 && req->store_dir)
		ah_image_dedupe(req->image_dir, req->store_dir, req->log_tag);
	if (rc != 0)
		rmdir(parent); /* the agent's first image: no empty directory left */
	return rc;
}

int ah_deploy_build_image(struct ah_manifest *out, const struct ah_deploy_req *req,
                          ah_err *err)
{
	char root[4096];
	int rc = ah_deploy_rmtree(req->work_dir) == 0 ? ah_deploy_mkdirs(req->work_dir, err)
	                                               : ah_err_set(err, AH_EFAIL, "cannot clear %s",
	                                                            req->work_dir);
	if (rc == 0)
		rc = fetch(root, sizeof(root), req, err);
	if (rc == 0) {
		ah_log_info("%s: checking the manifest", req->log_tag);
		rc = ah_manifest_load(out, root, err);
	}
	if (rc == 0) {
		SAY(req, "==> manifest %s: %s %s, entrypoint %s", out->file, out->name, out->version,
		    out->entrypoint);
		ah_log_info("%s: manifest %s ok: %s %s, entrypoint %s", req->log_tag, out->file,
		            out->name, out->version, out->entrypoint);
		rc = place_image(root, req, err);
	}
	if (rc != 0)
		SAY(req, "==> failed: %s", err->msg);
	return rc;
}
