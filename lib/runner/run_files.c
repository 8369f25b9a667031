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
 * the agent's user (sh, tar, sha256sum), like every other run: the runner
 * never follows a path the agent controls. Files are handed over as a tar
 * stream on a program's stdin, as many in one as BATCH_MAX holds: a program
 * in a sandbox costs a few milliseconds, and one per file made five
 * attachments cost a call ~55 ms (issue 31). ATTACH_MAX caps one blob; the
 * tar goes through a file, not memory (struct batch). */
#include "runner/run_files_int.h"
#include "runner/blob_cache.h"
#include "core/io.h"
#include "core/log.h"
#include "files/files.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ATTACH_MAX (256LL << 20)
#define BATCH_MAX (64LL << 20)
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

/* ah_rf_sh, whose stdin may be in_len bytes of the file in_fd (>= 0) instead of in. */
static int sh(ah_sandbox *sb, const char *script, const char *a1, const char *a2, const void *in,
              int in_fd, size_t in_len, int out_fd, size_t max_out, int64_t deadline,
              ah_sandbox_result *res, ah_err *err)
{
	const char *argv[] = {"/bin/sh", "-c", script, "sh", a1, a2, NULL};
	static const char *const envp[] = {"PATH=/usr/bin:/bin", "LC_ALL=C", NULL};
	int64_t left = deadline ? deadline - ah_rf_now() : STEP_MS;
	memset(res, 0, sizeof(*res));
	if (left <= 0)
		return ah_err_set(err, AH_ETIMEOUT, "the call's time is up");
	ah_sandbox_exec_spec x = {.argv = argv, .envp = envp, .stdin_data = in, .stdin_len = in_len,
	                          .stdin_from_fd = in_fd >= 0, .stdin_fd = in_fd,
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

int ah_rf_sh(ah_sandbox *sb, const char *script, const char *a1, const char *a2, const void *in,
             size_t in_len, int out_fd, size_t max_out, int64_t deadline, ah_sandbox_result *res,
             ah_err *err)
{
	return sh(sb, script, a1, a2, in, -1, in_len, out_fd, max_out, deadline, res, err);
}

/* The blob open in *fd, *size bytes: the store's own file (local) or, from
 * S3, this runner's copy (blob_cache.h), else fetched and kept. */
static int blob_open(const ah_store *s, ah_arena *a, const char *sha, int *fd, long long *size,
                     ah_err *err)
{
	bool s3 = ah_store_is_s3(s), cached = s3 && ah_blob_cache_open(store_cfg, sha, fd) == 0;
	int rc = cached ? 0 : ah_store_open_blob(s, a, sha, fd, err);
	struct stat st;
	if (rc == 0 && (fstat(*fd, &st) != 0 || st.st_size > ATTACH_MAX))
		rc = ah_err_set(err, AH_ETOOBIG, "blob %s unreadable or over %lld bytes", sha, ATTACH_MAX);
	if (rc == 0 && s3 && !cached)
		ah_blob_cache_keep(store_cfg, sha, *fd);
	if (rc == 0)
		*size = st.st_size;
	else if (*fd >= 0)
		close(*fd), *fd = -1;
	return rc;
}

/* Files for one tar in the sandbox: GNU format, whose names are bytes as
 * given (a pax name is UTF-8 that tar converts to its locale, C). The tar is
 * written to an unlinked file of the store's tmp/, each blob copied into it in
 * pieces, and spliced into the program's stdin: a call holds no file in
 * memory whole (a 100 MiB attachment had the runner's memory peak 200 MiB
 * higher: its bytes, then the tar's). */
typedef struct batch {
	struct archive *ar;
	int fd;
	size_t len;
	char *chunk;
} batch;

#define CHUNK (256 << 10)

static la_ssize_t batch_write(struct archive *ar, void *ud, const void *p, size_t n)
{
	batch *b = ud;
	if (ah_write_all(b->fd, p, n) != 0) {
		archive_set_error(ar, errno, "writing the tar: %s", strerror(errno));
		return -1;
	}
	b->len += n;
	return (la_ssize_t)n;
}

/* The tar's file, in the store's tmp/ and unlinked at once: made once per
 * placing, emptied for each batch. */
static int batch_file(batch *b, const ah_store *s, ah_arena *a, ah_err *err)
{
	if (b->fd >= 0)
		return ftruncate(b->fd, 0) == 0 && lseek(b->fd, 0, SEEK_SET) == 0
		           ? 0 : ah_err_set(err, AH_EFAIL, "emptying the sandbox's tar: %s", strerror(errno));
	char *path;
	int rc = ah_store_tmp(s, a, &b->fd, &path, err);
	if (rc == 0)
		unlink(path);
	return rc;
}

static int batch_open(batch *b, const ah_store *s, ah_arena *a, ah_err *err)
{
	b->len = 0;
	if (!b->chunk && !(b->chunk = malloc(CHUNK)))
		return ah_err_set(err, AH_EFAIL, "out of memory");
	if (batch_file(b, s, a, err) != 0)
		return AH_EFAIL;
	b->ar = archive_write_new();
	if (!b->ar || archive_write_set_format_gnutar(b->ar) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(b->ar, 1) != ARCHIVE_OK ||
	    archive_write_open2(b->ar, b, NULL, batch_write, NULL, NULL) != ARCHIVE_OK)
		return ah_err_set(err, AH_EFAIL, "tar for the sandbox: %s",
		                  b->ar ? archive_error_string(b->ar) : "out of memory");
	return 0;
}

/* An entry of the batch: a directory (fd -2), an empty file (fd -1) or
 * size bytes of fd. */
static int batch_entry(batch *b, const char *name, int mode, int fd, long long size, ah_err *err)
{
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, fd == -2 ? AE_IFDIR : AE_IFREG);
	archive_entry_set_perm(e, (mode_t)mode);
	archive_entry_set_size(e, fd >= 0 ? (la_int64_t)size : 0);
	archive_entry_set_mtime(e, time(NULL), 0);
	bool ok = archive_write_header(b->ar, e) == ARCHIVE_OK;
	archive_entry_free(e);
	ssize_t n = 0;
	for (off_t off = 0; ok && fd >= 0 && off < size; off += n) {
		size_t want = size - off < CHUNK ? (size_t)(size - off) : CHUNK;
		n = pread(fd, b->chunk, want, off);
		if (n <= 0)
			return ah_err_set(err, AH_EFAIL, "reading blob for %s: %s", name,
			                  n ? strerror(errno) : "shorter than its size");
		ok = archive_write_data(b->ar, b->chunk, (size_t)n) == n;
	}
	return ok ? 0 : ah_err_set(err, AH_EFAIL, "tar for the sandbox: %s", archive_error_string(b->ar));
}

/* The blob sha as the file name. */
static int batch_add(batch *b, const ah_store *s, ah_arena *a, const char *sha, const char *name,
                     int mode, ah_err *err)
{
	int fd = -1;
	long long size = 0;
	int rc = blob_open(s, a, sha, &fd, &size, err);
	if (rc == 0)
		rc = batch_entry(b, name, mode, fd, size, err);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* A script in the sandbox with stdin (len bytes of in_fd; none when -1);
 * *kept (when not NULL): whether it printed "kept" (KEPT_CHECK's answer). */
static int run_script(ah_sandbox *sb, const char *script, int in_fd, size_t len, int64_t deadline,
                      bool *kept, ah_err *err)
{
	ah_sandbox_result res;
	int rc = sh(sb, script, NULL, NULL, NULL, in_fd, len, -1, 4096, deadline, &res, err);
	if (kept)
		*kept = rc == 0 && res.out && strncmp(res.out, "kept", 4) == 0;
	ah_sandbox_result_free(&res);
	return rc;
}

/* The batch extracted by one program in the sandbox (script ends with a
 * tar reading stdin), and closed. */
static int batch_run(ah_sandbox *sb, batch *b, const char *script, int64_t deadline, bool *kept,
                     ah_err *err)
{
	int rc = 0;
	if (archive_write_close(b->ar) != ARCHIVE_OK)
		rc = ah_err_set(err, AH_EFAIL, "tar for the sandbox: %s", archive_error_string(b->ar));
	archive_write_free(b->ar);
	b->ar = NULL;
	return rc ? rc : run_script(sb, script, b->fd, b->len, deadline, kept, err);
}

/* One file to place: its blob, its name under the plan's directory, its mode. */
typedef struct placed {
	const char *sha, *name;
	int mode;
} placed;

/* How files go into the sandbox: as tar entries under /files/<dir>/; fresh:
 * the first program replaces dir (its old contents go: --recursive-unlink on
 * a directory entry for it); mark: the last one makes the session marker (an
 * entry too); after: shell run after the last tar (KEPT_CHECK), or NULL. One
 * program (a tar) per BATCH_MAX of files, where a shell making the directory,
 * then each file, then the marker ran five or more (a few ms each). */
typedef struct plan {
	const char *dir, *after;
	bool fresh, mark;
} plan;

static const char *tar_script(ah_arena *a, const plan *p, bool first, bool last)
{
	bool after = last && p->after;
	return ah_sprintf(a, "%star%s -x -p -m -f - -C /files%s%s", after ? "" : "exec ",
	                  first && p->fresh ? " --recursive-unlink" : "", after ? " && " : "",
	                  after ? p->after : "");
}

/* Files into the sandbox as p says; *kept (when not NULL): whether a
 * program printed "kept". */
static int place(ah_sandbox *sb, const ah_store *s, ah_arena *a, const placed *f, size_t n,
                 const plan *p, int64_t deadline, bool *kept, ah_err *err)
{
	batch b = {.fd = -1};
	bool first = true, said = false;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (!b.ar && (rc = batch_open(&b, s, a, err)) == 0 && first && p->fresh)
			rc = batch_entry(&b, p->dir, 0755, -2, 0, err);
		if (rc == 0)
			rc = batch_add(&b, s, a, f[i].sha, ah_sprintf(a, "%s/%s", p->dir, f[i].name), f[i].mode, err);
		bool last = i + 1 == n;
		if (rc == 0 && last && p->mark)
			rc = batch_entry(&b, MARKER + strlen("/files/"), 0644, -1, 0, err);
		if (rc == 0 && (b.len >= BATCH_MAX || last)) {
			rc = batch_run(sb, &b, tar_script(a, p, first, last), deadline, &said, err);
			first = false;
			if (kept)
				*kept |= said;
		}
	}
	if (b.ar)
		archive_write_free(b.ar);
	if (b.fd >= 0)
		close(b.fd);
	free(b.chunk);
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

bool ah_rf_dirs_empty(ah_sandbox *sb, const char *const *dirs)
{
	char root[64];
	snprintf(root, sizeof root, "/proc/%d/root", (int)ah_sandbox_pid(sb));
	int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return false;
	bool none = true;
	for (; none && *dirs; dirs++)
		none = dir_empty(rfd, *dirs);
	close(rfd);
	return none;
}

/* An attachment entry the agent may write ("ro": false; saved back). */
bool ah_rf_writable(json_object *e)
{
	json_object *ro = NULL;
	return json_object_object_get_ex(e, "ro", &ro) && ro && !json_object_get_boolean(ro);
}

#define PREP "rm -rf /files/agent && mkdir -p /files/agent /files/session"
/* Prints "kept" when the sandbox has its session's files already. */
#define KEPT_CHECK "{ [ ! -e " MARKER " ] || echo kept; }"

/* The attachments (validated: a runner trusts no path it is handed) and, for
 * a sandbox new to its session, the session's earlier outputs, as placed. */
static int list_files(ah_arena *a, json_object *att, json_object *ses, placed **fa, size_t *na,
                      placed **fs, size_t *ns, ah_err *err)
{
	size_t natt = att ? json_object_array_length(att) : 0, nses = ses ? json_object_array_length(ses) : 0;
	*fa = ah_alloc(a, (natt + 1) * sizeof **fa), *fs = ah_alloc(a, (nses + 1) * sizeof **fs);
	*na = *ns = 0;
	for (size_t i = 0; i < natt; i++) {
		json_object *e = json_object_array_get_idx(att, i);
		const char *sha = ah_rf_str(e, "sha"), *path = ah_rf_str(e, "path");
		char *norm;
		if (!sha || !path || ah_mount_path_problem(a, path, &norm))
			return ah_err_set(err, AH_EINVALID, "bad attachment");
		(*fa)[(*na)++] = (placed){sha, norm + strlen(AH_MOUNT_ROOT), ah_rf_writable(e) ? 0644 : 0444};
	}
	for (size_t i = 0; i < nses; i++) {
		json_object *e = json_object_array_get_idx(ses, i);
		const char *sha = ah_rf_str(e, "sha"), *name = ah_rf_str(e, "name");
		if (sha && name && !ah_filename_problem(name, strlen(name)))
			(*fs)[(*ns)++] = (placed){sha, name, 0644};
	}
	return 0;
}

int ah_run_files_in(const ah_config *cfg, ah_sandbox *sb, json_object *files, bool reused,
                    int64_t deadline, ah_err *err)
{
	const ah_store *s = get_store(cfg);
	if (!s)
		return ah_err_set(err, AH_EFAIL, "managed files unavailable");
	json_object *att = ah_rf_arr(files, "attach"), *ses = ah_rf_arr(files, "session");
	/* Nothing to place: no program to run. A new sandbox starts with an
	 * empty /files/agent, and a run without attachments leaves it so or has
	 * it emptied by its collect (run_collect.c); a reused one (a session's)
	 * may hold an earlier call's attachments, which are emptied. */
	static const char *const agent_dir[] = {"files/agent", NULL};
	if ((!att || !json_object_array_length(att)) && (!ses || !json_object_array_length(ses)))
		return !reused || ah_rf_dirs_empty(sb, agent_dir) ? 0
		                                                  : run_script(sb, PREP, -1, 0, deadline, NULL, err);
	ah_arena *a = ah_arena_new();
	placed *fa, *fs;
	size_t na, ns;
	bool kept = false; /* the session's files: only a sandbox new to them gets them */
	int rc = list_files(a, att, ses, &fa, &na, &fs, &ns, err);
	/* The common calls in one program: /files/agent rebuilt with its
	 * attachments, and the marker made or the session's files looked for. */
	const plan agent = {"agent", ns ? KEPT_CHECK : NULL, true, ns == 0},
	           session = {"session", NULL, false, true};
	if (rc == 0 && na)
		rc = place(sb, s, a, fa, na, &agent, deadline, &kept, err);
	else if (rc == 0)
		rc = run_script(sb, PREP " && " KEPT_CHECK, -1, 0, deadline, &kept, err);
	if (rc == 0 && ns && !kept)
		rc = place(sb, s, a, fs, ns, &session, deadline, NULL, err);
	ah_arena_destroy(a);
	return rc;
}
