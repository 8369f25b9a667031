/* One rclone FUSE process (see fuse.h): its command line (no secrets), its
 * clean environment (the credentials, as rclone's RCLONE_CONFIG_<REMOTE>_*
 * variables), its connections' check (fuse_guard.c, set up between fork and
 * exec), start until the mount answers, and stop. */
#include "runner/fuse_internal.h"
#include "buckets/buckets.h"
#include "core/log.h"
#include "deploy/deploy.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define START_TIMEOUT_MS 10000
#define STOP_GRACE_MS 2000
#define MAX_ARGS 40
#define MAX_ENV 16

static const char *get(json_object *e, const char *k)
{
	json_object *v;
	return json_object_object_get_ex(e, k, &v) && json_object_is_type(v, json_type_string)
	       ? json_object_get_string(v) : NULL;
}

static bool flag(json_object *e, const char *k)
{
	json_object *v;
	return json_object_object_get_ex(e, k, &v) && json_object_get_boolean(v);
}

/* RCLONE_CONFIG_BKT_* for the entry's provider. */
static size_t build_env(ah_arena *a, json_object *e, const char *home, const char **env)
{
	size_t n = 0;
	const char *provider = get(e, "provider"), *endpoint = get(e, "endpoint");
	env[n++] = "PATH=/usr/bin:/bin";
	env[n++] = ah_sprintf(a, "HOME=%s", home);
	if (provider && strcmp(provider, "gcs") == 0) {
		env[n++] = "RCLONE_CONFIG_BKT_TYPE=google cloud storage";
		env[n++] = ah_sprintf(a, "RCLONE_CONFIG_BKT_SERVICE_ACCOUNT_CREDENTIALS=%s",
		                      get(e, "service_account_json"));
		env[n++] = "RCLONE_CONFIG_BKT_BUCKET_POLICY_ONLY=true";
	} else {
		bool r2 = provider && strcmp(provider, "r2") == 0;
		const char *region = get(e, "region");
		env[n++] = "RCLONE_CONFIG_BKT_TYPE=s3";
		env[n++] = r2 ? "RCLONE_CONFIG_BKT_PROVIDER=Cloudflare"
		           : endpoint ? "RCLONE_CONFIG_BKT_PROVIDER=Other" : "RCLONE_CONFIG_BKT_PROVIDER=AWS";
		env[n++] = ah_sprintf(a, "RCLONE_CONFIG_BKT_ACCESS_KEY_ID=%s", get(e, "access_key_id"));
		env[n++] = ah_sprintf(a, "RCLONE_CONFIG_BKT_SECRET_ACCESS_KEY=%s",
		                      get(e, "secret_access_key"));
		env[n++] = ah_sprintf(a, "RCLONE_CONFIG_BKT_REGION=%s",
		                      region ? region : r2 ? "auto" : "us-east-1");
		env[n++] = "RCLONE_CONFIG_BKT_NO_CHECK_BUCKET=true";
		if (endpoint)
			env[n++] = "RCLONE_CONFIG_BKT_FORCE_PATH_STYLE=true";
	}
	if (endpoint && provider && strcmp(provider, "gcs") == 0) /* rclone wants the API's base */
		env[n++] = ah_sprintf(a, "RCLONE_CONFIG_BKT_ENDPOINT=%s/", ah_bucket_gcs_api_base(a, endpoint));
	else if (endpoint)
		env[n++] = ah_sprintf(a, "RCLONE_CONFIG_BKT_ENDPOINT=%s", endpoint);
	env[n] = NULL;
	return n;
}

/* rclone mount bkt:<bucket>[/<prefix>] <dir> and its VFS settings. */
static void build_argv(ah_arena *a, json_object *e, const char *rclone, int retries,
                       const char *dir, const char *cache_dir, const char **argv)
{
	size_t n = 0;
	const char *prefix = get(e, "prefix");
	json_object *ttl_o;
	long long ttl = json_object_object_get_ex(e, "ttl", &ttl_o) ? json_object_get_int64(ttl_o) : 60;
	argv[n++] = rclone;
	argv[n++] = "mount";
	argv[n++] = ah_sprintf(a, "bkt:%s%s%s", get(e, "bucket"), prefix && *prefix ? "/" : "",
	                       prefix ? prefix : "");
	argv[n++] = dir;
	const char *fixed[] = {"--config", "/dev/null", "--allow-other", "--umask", "0000",
	                       "--log-level", "NOTICE", "--cache-dir", cache_dir};
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		argv[n++] = fixed[i];
	/* A request the bucket fails (or the connection filter refuses) is tried
	 * this many times before the read fails: each try waits longer. */
	argv[n++] = "--low-level-retries";
	argv[n++] = ah_sprintf(a, "%d", retries);
	if (flag(e, "read_only"))
		argv[n++] = "--read-only";
	if (flag(e, "cache")) {
		/* The VFS cache: whole files on the runner's disk, for ttl seconds,
		 * and listings as long. */
		const char *t = ah_sprintf(a, "%llds", ttl);
		const char *c[] = {"--vfs-cache-mode", "full", "--vfs-cache-max-age", t,
		                   "--dir-cache-time", t};
		for (size_t i = 0; i < 6; i++)
			argv[n++] = c[i];
	} else {
		/* No cache: what another client put in the bucket shows at once, and
		 * a file written is in the bucket when it is closed. */
		argv[n++] = "--dir-cache-time";
		argv[n++] = "0s";
	}
	argv[n] = NULL;
}

/* The last line rclone logged, for an error message (no secrets: rclone
 * logs no credentials). */
static const char *log_tail(ah_arena *a, const char *log)
{
	char buf[2048];
	int fd = open(log, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? pread(fd, buf, sizeof(buf) - 1, 0) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return "rclone exited without a message";
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	const char *last = strrchr(buf, '\n');
	return ah_strdup(a, last ? last + 1 : buf);
}

/* dir is a FUSE mount point, read from the mount table: never a call into the
 * filesystem, which a stuck rclone would never answer (statfs would hang the
 * runner with it). */
static bool is_fuse(const char *dir)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[PATH_MAX * 2 + 256];
	bool found = false;
	size_t n = strlen(dir);
	while (f && !found && fgets(line, sizeof(line), f)) {
		/* "id parent major:minor root mountpoint options ... - fstype source ..." */
		const char *p = line;
		for (int field = 0; field < 4 && p; field++)
			p = strchr(p, ' ') ? strchr(p, ' ') + 1 : NULL;
		const char *sep = p ? strstr(p, " - ") : NULL;
		found = p && sep && strncmp(p, dir, n) == 0 && p[n] == ' ' &&
		        strncmp(sep + 3, "fuse", 4) == 0;
	}
	if (f)
		fclose(f);
	return found;
}

/* rclone, with the connection filter in place before it runs; the filter's
 * listener goes to the runner over sock (the child's end of a socketpair).
 * Between fork and exec only async-signal-safe calls: the runner has threads. */
static pid_t spawn(const char **argv, const char **env, const char *log, int sock)
{
	int out = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		int in = open("/dev/null", O_RDONLY);
		if (in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0 ||
		    dup2(sock, 3) < 0)
			_exit(127);
		setsid();
		syscall(SYS_close_range, 4, ~0U, 0);
		if (ah_fuse_guard_child(3) != 0) {
			static const char msg[] = "cannot install rclone's connection filter\n";
			if (write(2, msg, sizeof(msg) - 1) < 0)
				_exit(127);
			_exit(127);
		}
		close(3);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execve(argv[0], (char *const *)argv, (char *const *)env);
		_exit(127);
	}
	close(out);
	return pid;
}

/* rclone started under its guard; rc 0 or err set. */
static int launch(struct ah_fuse_proc *p, const char **argv, const char **env, const char *log,
                  ah_err *err)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return ah_err_set(err, AH_EFAIL, "socketpair: %s", strerror(errno));
	p->pid = spawn(argv, env, log, sv[1]);
	int e = errno;
	close(sv[1]);
	p->pidfd = p->pid > 0 ? (int)syscall(SYS_pidfd_open, p->pid, 0) : -1;
	int rc = 0;
	if (p->pid <= 0 || p->pidfd < 0)
		rc = ah_err_set(err, AH_EMOUNT, "Bucket mount at %s: cannot start rclone: %s", p->path,
		                strerror(p->pid <= 0 ? e : errno));
	else
		rc = ah_fuse_guard_start(p->guard, sv[0], err);
	close(sv[0]);
	return rc;
}

/* Until dir is a FUSE mount, the process dies, or the time is up. */
static int wait_ready(struct ah_fuse_proc *p, ah_arena *a, const char *log, ah_err *err)
{
	for (int waited = 0; waited < START_TIMEOUT_MS; waited += 20) {
		if (is_fuse(p->dir))
			return 0;
		struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};
		if (poll(&pf, 1, 20) > 0)
			return ah_err_set(err, AH_EMOUNT, "Bucket mount at %s (bucket '%s') could not start: "
			                  "%s", p->path, p->slug, log_tail(a, log));
	}
	return ah_err_set(err, AH_EMOUNT, "Bucket mount at %s (bucket '%s') did not come up within "
	                  "%d s", p->path, p->slug, START_TIMEOUT_MS / 1000);
}

int ah_fuse_proc_start(struct ah_fuse_proc *p, json_object *e, const char *rclone, int retries,
                       const ah_addr_policy *pol, ah_err *err)
{
	ah_arena *a = ah_arena_new();
	const char *argv[MAX_ARGS], *env[MAX_ENV];
	const char *log = ah_sprintf(a, "%s.log", p->dir), *cache = ah_sprintf(a, "%s.cache", p->dir);
	ah_err why;
	int rc = ah_fuse_guard_new(&p->guard, e, pol, ah_sprintf(a, "agent=%s: bucket mount at %s",
	                           p->agent, p->path), &why);
	if (rc != 0)
		rc = ah_err_set(err, AH_EMOUNT, "Bucket mount at %s (bucket '%s'): %s", p->path, p->slug,
		                why.msg);
	umount2(p->dir, MNT_DETACH); /* a previous runner's, if any */
	if (rc == 0 && ((rc = ah_deploy_mkdirs(p->dir, err)) != 0 || (rc = ah_deploy_mkdirs(cache, err)) != 0))
		rc = AH_EFAIL;
	if (rc == 0) {
		build_env(a, e, cache, env);
		build_argv(a, e, rclone, retries, p->dir, cache, argv);
		rc = launch(p, argv, env, log, err);
	}
	if (rc == 0)
		rc = wait_ready(p, a, log, err);
	memset(env, 0, sizeof(env));
	ah_arena_destroy(a);
	if (rc != 0)
		ah_fuse_proc_stop(p);
	return rc;
}

bool ah_fuse_proc_alive(const struct ah_fuse_proc *p)
{
	struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};
	return p->pidfd >= 0 && poll(&pf, 1, 0) == 0 && is_fuse(p->dir);
}

void ah_fuse_proc_stop(struct ah_fuse_proc *p)
{
	if (p->pid > 0) {
		/* SIGTERM: rclone unmounts itself; then the mount goes in any case. */
		kill(p->pid, SIGTERM);
		struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};
		if (p->pidfd < 0 || poll(&pf, 1, STOP_GRACE_MS) <= 0)
			kill(p->pid, SIGKILL);
		while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	if (p->pidfd >= 0)
		close(p->pidfd);
	ah_fuse_guard_free(p->guard);
	p->guard = NULL;
	p->pid = -1;
	p->pidfd = -1;
	umount2(p->dir, MNT_DETACH);
	char extra[PATH_MAX + 16];
	snprintf(extra, sizeof(extra), "%s.cache", p->dir);
	ah_deploy_rmtree(extra);
	snprintf(extra, sizeof(extra), "%s.log", p->dir);
	unlink(extra);
	rmdir(p->dir);
}
