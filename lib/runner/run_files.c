/* Managed files around a run (the "files" object of a run request):
 *   in:  /files/agent/ is rebuilt from the attachments before every run, so
 *        an attachment (or its removal) takes effect at the agent's next
 *        invocation, in new and session sandboxes alike; a read-only one is
 *        mode 0444 and never saved back (the agent owns its copy: it can chmod
 *        it, but what it writes there stays in that sandbox). A session's
 *        earlier outputs are put back under /files/session/ when its sandbox
 *        is new to them (after an idle reclaim, say).
 *   out: run_collect.c.
 * Bytes cross the sandbox boundary only through programs run inside it as
 * the agent's user (sh, cat, sha256sum), like every other run: the runner
 * never follows a path the agent controls. Attachments are handed over
 * through stdin, so each is read into memory once: ATTACH_MAX caps one. */
#include "runner/run_files_int.h"
#include "core/log.h"
#include "files/files.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

int64_t ah_rf_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ah_rf_sh(ah_sandbox *sb, const char *script, const char *a1, const char *a2, const void *in,
             size_t in_len, int out_fd, size_t max_out, int64_t deadline, ah_sandbox_result *res,
             ah_err *err)
{
	const char *argv[] = {"/bin/sh", "-c", script, "sh", a1, a2, NULL};
	static const char *const envp[] = {"PATH=/usr/bin:/bin", "LC_ALL=C", NULL};
	int64_t left = deadline ? deadline - ah_rf_now() : STEP_MS;
	memset(res, 0, sizeof(*res));
	if (left <= 0)
		return ah_err_set(err, AH_ETIMEOUT, "the call's time is up");
	ah_sandbox_exec_spec x = {.argv = argv, .envp = envp, .stdin_data = in, .stdin_len = in_len,
	                          .timeout_ms = (int)(left < STEP_MS ? left : STEP_MS),
	                          .max_output = max_out, .log_tag = "files", .cwd = "/files",
	                          .stdout_to_fd = out_fd >= 0, .stdout_fd = out_fd};
	int rc = ah_sandbox_exec(sb, &x, res, err);
	if (rc == 0 && res->timed_out)
		rc = ah_err_set(err, deadline && left <= STEP_MS ? AH_ETIMEOUT : AH_EFAIL,
		                "'%s' in the sandbox: timed out", script);
	else if (rc == 0 && (res->exit_code != 0 || res->output_truncated))
		rc = ah_err_set(err, res->output_truncated ? AH_ETOOBIG : AH_EFAIL,
		                "'%s' in the sandbox: exit %d%s", script, res->exit_code,
		                res->output_truncated ? " (output over the cap)" : "");
	return rc;
}

static int sh(ah_sandbox *sb, const char *script, const char *a1, const char *a2, const void *in,
              size_t in_len, int64_t deadline, ah_err *err)
{
	ah_sandbox_result res;
	int rc = ah_rf_sh(sb, script, a1, a2, in, in_len, -1, 4096, deadline, &res, err);
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
                   const char *mode, int64_t deadline, ah_err *err)
{
	char *buf = NULL;
	size_t len = 0;
	int rc = blob_bytes(s, sha, &buf, &len, err);
	if (rc == 0)
		rc = sh(sb, "mkdir -p -- \"${1%/*}\" && rm -f -- \"$1\" && cat > \"$1\" && chmod \"$2\" -- \"$1\"",
		        path, mode, buf, len, deadline, err);
	free(buf);
	return rc;
}

const char *ah_rf_str(json_object *o, const char *k)
{
	json_object *v;
	return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string)
	           ? json_object_get_string(v) : NULL;
}

json_object *ah_rf_arr(json_object *o, const char *k)
{
	json_object *v;
	return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_array) ? v : NULL;
}

int ah_run_files_in(const ah_config *cfg, ah_sandbox *sb, json_object *files, int64_t deadline,
                    ah_err *err)
{
	const ah_store *s = get_store(cfg);
	if (!s)
		return ah_err_set(err, AH_EFAIL, "managed files unavailable");
	json_object *att = ah_rf_arr(files, "attach"), *ses = ah_rf_arr(files, "session");
	/* Nothing to place: no program to run (the sandbox starts with empty
	 * /files/agent and /files/session, and each run's collect empties
	 * /files/agent again), so a call without files costs one exec, after it. */
	if ((!att || !json_object_array_length(att)) && (!ses || !json_object_array_length(ses)))
		return 0;
	int rc = sh(sb, "rm -rf /files/agent && mkdir -p /files/agent /files/session", NULL, NULL, NULL, 0,
	            deadline, err);
	ah_arena *a = ah_arena_new();
	for (size_t i = 0; rc == 0 && att && i < json_object_array_length(att); i++) {
		json_object *e = json_object_array_get_idx(att, i), *ro = NULL;
		const char *sha = ah_rf_str(e, "sha"), *path = ah_rf_str(e, "path");
		char *norm;
		json_object_object_get_ex(e, "ro", &ro);
		/* The API checked the path; a runner trusts no path it is handed. */
		if (!sha || !path || ah_mount_path_problem(a, path, &norm))
			rc = ah_err_set(err, AH_EINVALID, "bad attachment");
		else
			rc = put_one(sb, s, sha, norm, ro && !json_object_get_boolean(ro) ? "0644" : "0444", deadline,
			             err);
	}
	/* A session sandbox keeps its outputs; only a new one gets them back. */
	if (rc == 0 && ses && json_object_array_length(ses) &&
	    sh(sb, "test -e " MARKER, NULL, NULL, NULL, 0, deadline, err) != 0) {
		for (size_t i = 0; rc == 0 && i < json_object_array_length(ses); i++) {
			json_object *e = json_object_array_get_idx(ses, i);
			const char *sha = ah_rf_str(e, "sha"), *name = ah_rf_str(e, "name");
			if (!sha || !name || ah_filename_problem(name, strlen(name)))
				continue;
			rc = put_one(sb, s, sha, ah_sprintf(a, "/files/session/%s", name), "0644", deadline, err);
		}
	}
	if (rc == 0)
		rc = sh(sb, "touch " MARKER, NULL, NULL, NULL, 0, deadline, err);
	ah_arena_destroy(a);
	return rc;
}

