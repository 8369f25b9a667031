/* Installing an agent's npm dependencies. npm runs the project's install
 * scripts, i.e. strangers' code, so it only ever runs inside a sandbox: the
 * project directory is bound read-write at /app, the network is the sandbox's
 * (outbound NAT only), and limits and a deadline apply. HOME and the npm cache
 * live in a directory inside the project that is removed afterwards, so nothing
 * of the host's home is read and the cache does not end up in the image. */
#include "deploy/deploy.h"
#include "core/log.h"
#include "sandbox/sandbox.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define BUILD_HOME ".agenthost-build-home"
#define TAIL_CHARS 600

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
	if (r->timed_out)
		return ah_err_set(err, AH_EINVALID, "Dependency installation failed: timed out after %d s",
		                  opts->timeout_seconds);
	if (r->oom_killed)
		return ah_err_set(err, AH_EINVALID, "Dependency installation failed: out of memory");
	if (r->exit_code == 0)
		return 0;
	output_tail(tail, sizeof(tail), r);
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

/* The one place that knows how a command reaches a sandbox. */
static int run_in_sandbox(const char *project_dir, const char *const *argv,
                          const char *const *envp, const struct ah_build_opts *opts,
                          ah_err *err)
{
	ah_sandbox *sb = NULL;
	ah_sandbox_spec spec = {.work_dir = project_dir};
	ah_sandbox_result res = {0};
	ah_err sberr = {0};
	int rc = ah_sandbox_create(&sb, &spec, &sberr);
	if (rc != 0) /* the machine's fault: worth a retry */
		return ah_err_set(err, AH_EFAIL, "Could not start the build sandbox: %s", sberr.msg);
	ah_log_info("%s: npm %s in sandbox %s", opts->log_tag, argv[1], ah_sandbox_id(sb));
	ah_sandbox_exec_spec x = {
		.argv = argv, .envp = envp, .timeout_ms = opts->timeout_seconds * 1000,
		.max_output = 4 << 20, .log_tag = opts->log_tag, .cwd = "/app",
	};
	rc = ah_sandbox_exec(sb, &x, &res, &sberr);
	if (rc == 0)
		rc = judge(&res, opts, err);
	else
		rc = ah_err_set(err, AH_EFAIL, "The build sandbox failed: %s", sberr.msg);
	ah_sandbox_result_free(&res);
	ah_sandbox_destroy(sb);
	return rc;
}

int ah_build_dependencies(const char *project_dir, const struct ah_build_opts *opts,
                          ah_err *err)
{
	if (!is_file(project_dir, "package.json"))
		return 0;
	bool lock = is_file(project_dir, "package-lock.json") ||
	            is_file(project_dir, "npm-shrinkwrap.json");
	const char *argv[] = {"/usr/bin/npm", lock ? "ci" : "install", "--omit=dev",
	                      "--no-audit", "--no-fund", NULL};
	const char *envp[] = {
		"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/app/" BUILD_HOME,
		"npm_config_cache=/app/" BUILD_HOME "/npm-cache", "npm_config_update_notifier=false",
		"npm_config_loglevel=warn", "NODE_ENV=production", "LANG=C.UTF-8", NULL,
	};
	if (opts->cancel && *opts->cancel)
		return ah_err_set(err, AH_EFAIL, "Deploy cancelled (runner shutting down)");
	int rc = run_in_sandbox(project_dir, argv, envp, opts, err);
	char home[4096];
	snprintf(home, sizeof(home), "%s/" BUILD_HOME, project_dir);
	ah_deploy_rmtree(home);
	return rc;
}
