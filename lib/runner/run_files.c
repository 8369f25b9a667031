/* Managed files around a run (the "files" object of a run request):
 *   in:  /files/agent/ is rebuilt from the attachments before every run, so
 *        an attachment (or its removal) takes effect at the agent's next
 *        invocation, in new and session sandboxes alike; a read-only one is
 *        mode 0444 and never saved back (the agent owns its copy: it can chmod
 *        it, but what it writes there stays in that sandbox). A session's
 *        earlier outputs are put back under /files/session/ when its sandbox
 *        is new to them (after an idle reclaim, say).
 *   out: after the run, regular files directly under /files/session/ that are
 *        new or changed (by SHA-256, computed inside the sandbox) and writable
 *        attachments that changed are copied out to files_dir/tmp, within
 *        collect_max bytes (the user's free quota), and listed in the answer
 *        ("files_out"); the API turns them into file records.
 * Bytes cross the sandbox boundary only through programs run inside it as
 * the agent's user (sh, cat, sha256sum), like every other run: the runner
 * never follows a path the agent controls. Attachments are handed over
 * through stdin, so each is read into memory once: ATTACH_MAX caps one. */
#include "runner/run_files.h"
#include "core/log.h"
#include "files/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ATTACH_MAX (256LL << 20)
#define STEP_MS 120000
#define MARKER "/files/.ah-session"

static ah_store *store;
static pthread_once_t store_once = PTHREAD_ONCE_INIT;
static const ah_config *store_cfg;

static void open_store(void)
{
	ah_err err;
	if (ah_store_open(&store, store_cfg, &err) != 0)
		ah_log_error("managed files unavailable: %s", err.msg);
}

static const ah_store *get_store(const ah_config *cfg)
{
	store_cfg = cfg;
	pthread_once(&store_once, open_store);
	return store;
}

const ah_store *ah_run_files_store(const ah_config *cfg)
{
	return get_store(cfg);
}

/* sh -c script with args, as the agent; stdout into out_fd (capped) or memory. */
static int sh(ah_sandbox *sb, const char *script, const char *a1, const char *a2, const void *in,
              size_t in_len, int out_fd, size_t max_out, ah_sandbox_result *res, ah_err *err)
{
	const char *argv[] = {"/bin/sh", "-c", script, "sh", a1, a2, NULL};
	static const char *const envp[] = {"PATH=/usr/bin:/bin", "LC_ALL=C", NULL};
	ah_sandbox_exec_spec x = {.argv = argv, .envp = envp, .stdin_data = in, .stdin_len = in_len,
	                          .timeout_ms = STEP_MS, .max_output = max_out, .log_tag = "files",
	                          .cwd = "/files", .stdout_to_fd = out_fd >= 0, .stdout_fd = out_fd};
	memset(res, 0, sizeof(*res));
	int rc = ah_sandbox_exec(sb, &x, res, err);
	if (rc == 0 && (res->exit_code != 0 || res->output_truncated))
		rc = ah_err_set(err, AH_EFAIL, "'%s' in the sandbox: exit %d%s", script, res->exit_code,
		                res->output_truncated ? " (output over the cap)" : "");
	return rc;
}

static int sh_simple(ah_sandbox *sb, const char *script, const char *a1, const char *a2,
                     const void *in, size_t in_len, ah_err *err)
{
	ah_sandbox_result res;
	int rc = sh(sb, script, a1, a2, in, in_len, -1, 4096, &res, err);
	ah_sandbox_result_free(&res);
	return rc;
}

/* The blob's bytes in memory (a tmp/ copy first: S3 blobs come that way). */
static int blob_bytes(const ah_store *s, const char *sha, char **buf, size_t *len, ah_err *err)
{
	ah_arena *a = ah_arena_new();
	char *tmp;
	int fd, rc = ah_store_tmp(s, a, &fd, &tmp, err);
	if (rc == 0) {
		close(fd);
		rc = ah_store_fetch(s, sha, tmp, err);
	}
	FILE *f = rc == 0 ? fopen(tmp, "rb") : NULL;
	struct stat st;
	if (rc == 0 && (!f || fstat(fileno(f), &st) != 0 || st.st_size > ATTACH_MAX))
		rc = ah_err_set(err, AH_ETOOBIG, "blob %s unreadable or over %lld bytes", sha, ATTACH_MAX);
	if (rc == 0) {
		*len = (size_t)st.st_size;
		*buf = malloc(*len + 1);
		if (!*buf || fread(*buf, 1, *len, f) != *len)
			rc = ah_err_set(err, AH_EFAIL, "reading blob %s", sha);
	}
	if (f)
		fclose(f);
	unlink(tmp);
	ah_arena_destroy(a);
	return rc;
}

static int put_one(ah_sandbox *sb, const ah_store *s, const char *sha, const char *path,
                   const char *mode, ah_err *err)
{
	char *buf = NULL;
	size_t len = 0;
	int rc = blob_bytes(s, sha, &buf, &len, err);
	if (rc == 0)
		rc = sh_simple(sb, "mkdir -p -- \"${1%/*}\" && rm -f -- \"$1\" && cat > \"$1\" && chmod \"$2\" -- \"$1\"",
		               path, mode, buf, len, err);
	free(buf);
	return rc;
}

static const char *str(json_object *o, const char *k)
{
	json_object *v;
	return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string)
	           ? json_object_get_string(v) : NULL;
}

static json_object *arr(json_object *o, const char *k)
{
	json_object *v;
	return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_array) ? v : NULL;
}

int ah_run_files_in(const ah_config *cfg, ah_sandbox *sb, json_object *files, ah_err *err)
{
	const ah_store *s = get_store(cfg);
	if (!s)
		return ah_err_set(err, AH_EFAIL, "managed files unavailable");
	json_object *att = arr(files, "attach"), *ses = arr(files, "session");
	/* Nothing to place: no program to run (the sandbox starts with empty
	 * /files/agent and /files/session, and each run's collect empties
	 * /files/agent again), so a call without files costs one exec, after it. */
	if ((!att || !json_object_array_length(att)) && (!ses || !json_object_array_length(ses)))
		return 0;
	int rc = sh_simple(sb, "rm -rf /files/agent && mkdir -p /files/agent /files/session", NULL, NULL,
	                   NULL, 0, err);
	ah_arena *a = ah_arena_new();
	for (size_t i = 0; rc == 0 && att && i < json_object_array_length(att); i++) {
		json_object *e = json_object_array_get_idx(att, i), *ro = NULL;
		const char *sha = str(e, "sha"), *path = str(e, "path");
		char *norm;
		json_object_object_get_ex(e, "ro", &ro);
		/* The API checked the path; a runner trusts no path it is handed. */
		if (!sha || !path || ah_mount_path_problem(a, path, &norm))
			rc = ah_err_set(err, AH_EINVALID, "bad attachment");
		else
			rc = put_one(sb, s, sha, norm, ro && !json_object_get_boolean(ro) ? "0644" : "0444", err);
	}
	/* A session sandbox keeps its outputs; only a new one gets them back. */
	if (rc == 0 && ses && json_object_array_length(ses) &&
	    sh_simple(sb, "test -e " MARKER, NULL, NULL, NULL, 0, err) != 0) {
		for (size_t i = 0; rc == 0 && i < json_object_array_length(ses); i++) {
			json_object *e = json_object_array_get_idx(ses, i);
			const char *sha = str(e, "sha"), *name = str(e, "name");
			if (!sha || !name || ah_filename_problem(name, strlen(name)))
				continue;
			rc = put_one(sb, s, sha, ah_sprintf(a, "/files/session/%s", name), "0644", err);
		}
	}
	if (rc == 0)
		rc = sh_simple(sb, "touch " MARKER, NULL, NULL, NULL, 0, err);
	ah_arena_destroy(a);
	return rc;
}

/* Copies path out of the sandbox into a tmp/ file of at most budget bytes;
 * the hash is taken here, of the bytes as copied. */
static int copy_out(ah_sandbox *sb, const ah_store *s, ah_arena *a, const char *path,
                    long long budget, json_object *entry, ah_err *err)
{
	char *tmp, sha[65];
	long long size = 0;
	int fd;
	ah_sandbox_result res;
	if (budget <= 0)
		return ah_err_set(err, AH_ETOOBIG, "no quota left for %s", path);
	int rc = ah_store_tmp(s, a, &fd, &tmp, err);
	if (rc)
		return rc;
	rc = sh(sb, "cat -- \"$1\"", path, NULL, NULL, 0, fd, (size_t)budget, &res, err);
	ah_sandbox_result_free(&res);
	close(fd);
	if (rc == 0)
		rc = ah_file_sha256(tmp, sha, &size, err);
	if (rc) {
		unlink(tmp);
		return rc;
	}
	json_object_object_add(entry, "sha", json_object_new_string(sha));
	json_object_object_add(entry, "size", json_object_new_int64(size));
	json_object_object_add(entry, "tmp", json_object_new_string(tmp));
	return 0;
}

/* "<sha>  <name>" lines of sha256sum; fn for each well-formed one. */
static void each_sum(const char *out, void (*fn)(void *ud, const char *sha, const char *name), void *ud)
{
	for (const char *p = out; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		/* A leading backslash: sha256sum escaped a name (newline, backslash). */
		if (n > 66 && p[0] != '\\' && p[64] == ' ' && p[65] == ' ') {
			char sha[65], name[1100];
			memcpy(sha, p, 64);
			sha[64] = '\0';
			snprintf(name, sizeof(name), "%.*s", (int)(n - 66), p + 66);
			fn(ud, sha, name);
		}
		p = nl ? nl + 1 : NULL;
	}
}

struct collect {
	ah_sandbox *sb;
	const ah_store *s;
	ah_arena *a;
	json_object *known, *out;
	long long budget;
	const char *tag;
};

static void session_one(void *ud, const char *sha, const char *name)
{
	struct collect *c = ud;
	ah_err err;
	if (strncmp(name, "./", 2) != 0 || ah_filename_problem(name + 2, strlen(name + 2)))
		return;
	name += 2;
	for (size_t i = 0; c->known && i < json_object_array_length(c->known); i++) {
		json_object *e = json_object_array_get_idx(c->known, i);
		const char *kn = str(e, "name"), *ks = str(e, "sha");
		if (kn && ks && strcmp(kn, name) == 0 && strcmp(ks, sha) == 0)
			return; /* unchanged since it was stored */
	}
	json_object *e = json_object_new_object();
	json_object_object_add(e, "name", json_object_new_string(name));
	if (copy_out(c->sb, c->s, c->a, ah_sprintf(c->a, "/files/session/%s", name), c->budget, e, &err) != 0) {
		ah_log_warn("%s: session file %s not kept: %s", c->tag, name, err.msg);
		json_object_put(e);
		return;
	}
	json_object *sz;
	json_object_object_get_ex(e, "size", &sz);
	c->budget -= json_object_get_int64(sz);
	json_object_array_add(c->out, e);
}

static char *sums(ah_sandbox *sb, const char *script, const char *arg, ah_err *err)
{
	ah_sandbox_result res;
	char *out = NULL;
	if (sh(sb, script, arg, NULL, NULL, 0, -1, 4 << 20, &res, err) == 0) {
		out = res.out;
		res.out = NULL;
	}
	ah_sandbox_result_free(&res);
	return out;
}

/* Writable attachments whose bytes changed. */
static void attach_out(struct collect *c, json_object *att, json_object *out)
{
	ah_err err;
	for (size_t i = 0; att && i < json_object_array_length(att); i++) {
		json_object *e = json_object_array_get_idx(att, i), *ro = NULL;
		const char *sha = str(e, "sha"), *path = str(e, "path"), *id = str(e, "file_id");
		char *norm;
		json_object_object_get_ex(e, "ro", &ro);
		if (!sha || !path || !id || !ro || json_object_get_boolean(ro) ||
		    ah_mount_path_problem(c->a, path, &norm))
			continue;
		char *now = sums(c->sb, "sha256sum -- \"$1\"", norm, &err);
		if (now && strncmp(now, sha, 64) != 0) {
			json_object *o = json_object_new_object();
			json_object_object_add(o, "file_id", json_object_new_string(id));
			if (copy_out(c->sb, c->s, c->a, norm, c->budget, o, &err) == 0) {
				json_object *sz;
				json_object_object_get_ex(o, "size", &sz);
				c->budget -= json_object_get_int64(sz);
				json_object_array_add(out, o);
			} else {
				ah_log_warn("%s: attachment %s not saved back: %s", c->tag, id, err.msg);
				json_object_put(o);
			}
		}
		free(now);
	}
}

/* True when dir (under the sandbox's root rfd) exists and holds nothing. */
static bool dir_empty(int rfd, const char *dir)
{
	/* Not RESOLVE_NO_XDEV: /files is a bind mount of its own. */
	struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
	                        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
	                                   RESOLVE_NO_MAGICLINKS };
	int fd = (int)syscall(SYS_openat2, rfd, dir, &how, sizeof how);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	bool empty = true;
	for (struct dirent *e; empty && (e = readdir(d));)
		empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
	closedir(d);
	return empty;
}

/* Whether the run left anything to collect, looked at through the keeper's
 * /proc root instead of a program in the sandbox (which costs a call ~20 ms):
 * without attachments, empty /files/agent and /files/session mean nothing to
 * do. Anything unexpected (no such directories) means: collect. */
static bool nothing_to_collect(ah_sandbox *sb, json_object *files)
{
	json_object *att = arr(files, "attach");
	if (att && json_object_array_length(att))
		return false;
	char root[64];
	snprintf(root, sizeof root, "/proc/%d/root", (int)ah_sandbox_pid(sb));
	int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return false;
	bool none = dir_empty(rfd, "files/agent") && dir_empty(rfd, "files/session");
	close(rfd);
	return none;
}

void ah_run_files_out(const ah_config *cfg, ah_sandbox *sb, json_object *files, json_object *ans,
                      const char *tag)
{
	const ah_store *s = get_store(cfg);
	json_object *max = NULL;
	ah_err err;
	if (!s)
		return;
	if (nothing_to_collect(sb, files)) {
		json_object *fo = json_object_new_object();
		json_object_object_add(fo, "session", json_object_new_array());
		json_object_object_add(fo, "attach", json_object_new_array());
		json_object_object_add(ans, "files_out", fo);
		return;
	}
	json_object_object_get_ex(files, "collect_max", &max);
	struct collect c = {sb, s, ah_arena_new(), arr(files, "session"), json_object_new_array(),
	                    max ? json_object_get_int64(max) : 0, tag};
	json_object *att_out = json_object_new_array();
	/* Writable attachments first: they are the user's files already. */
	attach_out(&c, arr(files, "attach"), att_out);
	/* One program for the common case: attachments leave with the run (the
	 * next one rebuilds them), and the session's files are hashed. */
	char *list = sums(sb, "rm -rf /files/agent; mkdir -p /files/agent /files/session && cd /files/session"
	                  " && find . -maxdepth 1 -type f -print0 | xargs -0 -r sha256sum --", NULL, &err);
	if (list)
		each_sum(list, session_one, &c);
	else
		ah_log_warn("%s: cannot list /files/session: %s", tag, err.msg);
	free(list);
	json_object *fo = json_object_new_object();
	json_object_object_add(fo, "session", c.out);
	json_object_object_add(fo, "attach", att_out);
	json_object_object_add(ans, "files_out", fo);
	ah_arena_destroy(c.a);
}
