/* A run's outputs out of its sandbox (run_files.h): after the run, writable
 * attachments that changed and regular files directly under /files/session/
 * that are new or changed (by SHA-256, computed inside the sandbox) are
 * copied out to files_dir/tmp and listed in the answer ("files_out"); the API
 * turns them into file records. What one call takes out is bounded by what
 * its sandbox held, not by the user's quota alone (N calls at once would each
 * stage the whole quota on the host before it refused all but one):
 *   - at most max_files session files (the API's session_output_max_files);
 *   - at most max_bytes (session_output_max_bytes), the quota left
 *     (collect_max) and the sandbox's disk, each file counted by the larger
 *     of its size and the disk blocks it uses;
 *   - no sparse file: its copy would be larger than the blocks it took (a
 *     `truncate -s 200M` takes none);
 *   - within the call's timeout.
 * Session files go in name order; the first that cannot be taken ends the
 * collection: those before it are kept, and "error" tells the user why the
 * rest are not. Nothing is left out without a word, except what the contract
 * leaves out (names a file cannot have, anything but a regular file). */
#include "runner/run_files_int.h"
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_MAX_FILES 100 /* an API that sends no max_files */
#define MAX_FILES_LIMIT 100000
#define LIST_ENTRY_MAX 300    /* "<size> <blocks> <name>\0", a name at most 255 bytes */
#define SPARSE_SLACK 4096     /* bytes a file may hold beyond its blocks (inline data) */
#define CLEANUP_MS 5000       /* /files/agent's removal, even when the time is up */

typedef struct out_file {
	char *name;
	long long size, blocks;
	char sha[65];        /* of the bytes now, when it had to be hashed to tell */
} out_file;

struct collect {
	ah_sandbox *sb;
	const ah_store *s;
	ah_arena *a;
	json_object *known;  /* the session's stored files: [{"name","sha","size"}] */
	long long bytes_left, files_left, max_files, max_bytes;
	const char *bytes_why; /* what max_bytes is */
	int64_t deadline;
	const char *tag;
	const char *error;   /* the first reason something was not kept */
	bool cleaned;        /* /files/agent was emptied (by the listing) */
};

static void fail(struct collect *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct collect *c, const char *fmt, ...)
{
	if (c->error)
		return;
	va_list ap;
	va_start(ap, fmt);
	char buf[1024];
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	c->error = ah_strdup(c->a, buf);
	ah_log_warn("%s: outputs: %s", c->tag, c->error);
}

/* What one file costs: the larger of its bytes and the disk it takes. */
static long long charge_of(long long size, long long blocks)
{
	return size > blocks * 512 ? size : blocks * 512;
}

static bool sparse(long long size, long long blocks)
{
	return size > blocks * 512 + SPARSE_SLACK;
}

/* The reason a step failed, as the user reads it. */
static void fail_step(struct collect *c, int rc, const char *what)
{
	if (rc == AH_ETIMEOUT)
		fail(c, "the call's timeout ran out while its outputs were collected: %s and the files after"
		     " it not kept", what);
	else
		fail(c, "%s could not be copied out of the sandbox: it and the files after it not kept", what);
}

/* Copies path out of the sandbox into a tmp/ file within the bytes left; the
 * hash is taken here, of the bytes as copied. charge: what the listing saw. */
static int copy_out(struct collect *c, const char *path, long long charge, json_object *entry,
                    ah_err *err)
{
	char *tmp, sha[65];
	long long size = 0;
	int fd;
	ah_sandbox_result res;
	int rc = ah_store_tmp(c->s, c->a, &fd, &tmp, err);
	if (rc)
		return rc;
	/* max_output 0 would be exec's default cap: 1 tells an empty file. */
	rc = ah_rf_sh(c->sb, "cat -- \"$1\"", path, NULL, NULL, 0, fd,
	              (size_t)(c->bytes_left > 0 ? c->bytes_left : 1), c->deadline, &res, err);
	ah_sandbox_result_free(&res);
	close(fd);
	if (rc == 0)
		rc = ah_file_sha256(tmp, sha, &size, err);
	if (rc == 0 && size > c->bytes_left)
		rc = ah_err_set(err, AH_ETOOBIG, "%s grew past the bytes left", path);
	if (rc) {
		unlink(tmp);
		return rc;
	}
	c->bytes_left -= size > charge ? size : charge;
	json_object_object_add(entry, "sha", json_object_new_string(sha));
	json_object_object_add(entry, "size", json_object_new_int64(size));
	json_object_object_add(entry, "tmp", json_object_new_string(tmp));
	return 0;
}

/* One file within the byte cap: 0 and its entry, or the reason (failed). */
static int take(struct collect *c, const char *path, const char *shown, long long size,
                long long blocks, json_object *entry)
{
	ah_err err;
	long long charge = charge_of(size, blocks);
	if (sparse(size, blocks)) {
		fail(c, "%s is a sparse file (%lld bytes, %lld of them on disk), which is never kept: it and"
		     " the files after it not kept", shown, size, blocks * 512);
		return AH_EINVALID;
	}
	if (charge > c->bytes_left) {
		fail(c, "the call's outputs are over %lld bytes (%s): %s and the files after it not kept",
		     c->max_bytes, c->bytes_why, shown);
		return AH_ETOOBIG;
	}
	int rc = copy_out(c, path, charge, entry, &err);
	if (rc == AH_ETOOBIG) /* it grew after the listing */
		fail(c, "the call's outputs are over %lld bytes (%s): %s and the files after it not kept",
		     c->max_bytes, c->bytes_why, shown);
	else if (rc)
		fail_step(c, rc, shown);
	if (rc)
		ah_log_warn("%s: %s not kept: %s", c->tag, path, err.msg);
	return rc;
}

/* Writable attachments whose bytes changed (not counted in max_files). */
static void attach_out(struct collect *c, json_object *att, json_object *out)
{
	for (size_t i = 0; !c->error && att && i < json_object_array_length(att); i++) {
		json_object *e = json_object_array_get_idx(att, i);
		const char *sha = ah_rf_str(e, "sha"), *path = ah_rf_str(e, "path"), *id = ah_rf_str(e, "file_id");
		char *norm, now[65];
		long long size, blocks;
		ah_sandbox_result res;
		ah_err err;
		if (!sha || !path || !id || !ah_rf_writable(e) || ah_mount_path_problem(c->a, path, &norm))
			continue;
		/* A regular file (find does not follow a symbolic link), or gone;
		 * a sparse one is not read (take refuses it). */
		int rc = ah_rf_sh(c->sb, "s=$(find \"$1\" -maxdepth 0 -type f -printf '%s %b') && [ -n \"$s\" ]"
		                  " && printf '%s ' \"$s\" && { [ \"${s% *}\" -gt $((${s#* } * 512 + $2)) ] ||"
		                  " sha256sum -- \"$1\"; }", norm, ah_sprintf(c->a, "%d", SPARSE_SLACK), NULL, 0,
		                  -1, 4096, c->deadline, &res, &err);
		int got = rc == 0 && res.out ? sscanf(res.out, "%lld %lld %64s", &size, &blocks, now) : 0;
		ah_sandbox_result_free(&res);
		if (rc == AH_ETIMEOUT)
			fail_step(c, rc, ah_sprintf(c->a, "the attachment at %s", norm));
		if (got < 2 || (got == 3 && strcmp(now, sha) == 0))
			continue; /* unchanged, or removed by the agent: nothing to save */
		json_object *o = json_object_new_object();
		json_object_object_add(o, "file_id", json_object_new_string(id));
		if (take(c, norm, ah_sprintf(c->a, "the attachment at %s", norm), size, blocks, o) == 0)
			json_object_array_add(out, o);
		else
			json_object_put(o);
	}
}

/* "<size> <blocks> <name>\0" entries of the listing → files. */
static size_t parse_list(ah_arena *a, const char *out, size_t len, out_file *f, size_t max)
{
	size_t n = 0;
	for (const char *p = out, *end = out + len; p < end && n < max;) {
		const char *z = memchr(p, '\0', (size_t)(end - p));
		char *rest;
		if (!z)
			break;
		long long size = strtoll(p, &rest, 10), blocks = *rest == ' ' ? strtoll(rest + 1, &rest, 10) : -1;
		if (*rest == ' ' && size >= 0 && blocks >= 0 && rest + 1 < z)
			f[n++] = (out_file){.name = ah_strdup(a, rest + 1), .size = size, .blocks = blocks};
		p = z + 1;
	}
	return n;
}

static json_object *known_of(struct collect *c, const char *name)
{
	for (size_t i = 0; c->known && i < json_object_array_length(c->known); i++) {
		json_object *e = json_object_array_get_idx(c->known, i);
		const char *kn = ah_rf_str(e, "name");
		if (kn && strcmp(kn, name) == 0)
			return e;
	}
	return NULL;
}

/* A stored file of that name and size may be unchanged: its hash tells. */
static bool maybe_same(struct collect *c, const out_file *f)
{
	json_object *k = known_of(c, f->name), *sz;
	return k && ah_rf_str(k, "sha") && !sparse(f->size, f->blocks) &&
	       (!json_object_object_get_ex(k, "size", &sz) || json_object_get_int64(sz) == f->size);
}

/* The hashes of the files that may be unchanged, in one program. */
static int hash_known(struct collect *c, out_file *f, size_t n)
{
	char *names = NULL;
	size_t len = 0, cnt = 0;
	FILE *m = open_memstream(&names, &len);
	for (size_t i = 0; m && i < n; i++)
		if (maybe_same(c, &f[i]) && ++cnt)
			fwrite(f[i].name, 1, strlen(f[i].name) + 1, m);
	if (!m || fclose(m) != 0)
		return AH_EFAIL;
	ah_sandbox_result res;
	ah_err err;
	int rc = cnt == 0 ? 0
	         : ah_rf_sh(c->sb, "cd /files/session && xargs -0 -r sha256sum --", NULL, NULL, names, len,
	                    -1, cnt * (LIST_ENTRY_MAX + 70), c->deadline, &res, &err);
	for (const char *p = rc == 0 && cnt ? res.out : NULL; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t k = nl ? (size_t)(nl - p) : strlen(p);
		for (size_t i = 0; k > 66 && p[64] == ' ' && i < n; i++)
			if (strlen(f[i].name) == k - 66 && memcmp(f[i].name, p + 66, k - 66) == 0)
				snprintf(f[i].sha, sizeof f[i].sha, "%.64s", p);
		p = nl ? nl + 1 : NULL;
	}
	if (cnt)
		ah_sandbox_result_free(&res);
	free(names);
	return rc;
}

static bool unchanged(struct collect *c, const out_file *f)
{
	json_object *k = known_of(c, f->name);
	const char *sha = k ? ah_rf_str(k, "sha") : NULL;
	return sha && f->sha[0] && strcmp(sha, f->sha) == 0;
}

/* The session's files in name order, up to the first that cannot be kept. */
static void session_out(struct collect *c, out_file *f, size_t n, bool cut, json_object *out)
{
	int rc = hash_known(c, f, n);
	if (rc) {
		fail(c, rc == AH_ETIMEOUT ? "the call's timeout ran out before its session files were collected:"
		     " none kept" : "the session's files could not be read: none kept");
		return;
	}
	for (size_t i = 0; !c->error && i < n; i++) {
		const char *name = f[i].name;
		if (ah_filename_problem(name, strlen(name)) || unchanged(c, &f[i]))
			continue;
		if (c->files_left <= 0) {
			fail(c, "the call's outputs are over %lld files: the first %lld new or changed by name are"
			     " kept, %s and the files after it not", c->max_files, c->max_files, name);
			break;
		}
		json_object *e = json_object_new_object();
		json_object_object_add(e, "name", json_object_new_string(name));
		if (take(c, ah_sprintf(c->a, "/files/session/%s", name), name, f[i].size, f[i].blocks, e)) {
			json_object_put(e);
			break;
		}
		c->files_left--;
		json_object_array_add(out, e);
	}
	if (cut && !c->error)
		fail(c, "the call's outputs are over %zu files listed: the files after %s not kept", n,
		     f[n - 1].name);
}

/* Lists /files/session (and removes /files/agent: the next run rebuilds it). */
static void list_and_take(struct collect *c, json_object *out)
{
	size_t k = (size_t)c->max_files + (c->known ? json_object_array_length(c->known) : 0) + 1;
	ah_sandbox_result res;
	ah_err err;
	char arg[32];
	snprintf(arg, sizeof arg, "%zu", k);
	int rc = ah_rf_sh(c->sb, "rm -rf /files/agent; mkdir -p /files/agent /files/session &&"
	                  " cd /files/session && find . -mindepth 1 -maxdepth 1 -type f -printf '%s %b %P\\0'"
	                  " | sort -z -t ' ' -k 3 | head -z -n \"$1\"", arg, NULL, NULL, 0, -1,
	                  k * LIST_ENTRY_MAX + 64, c->deadline, &res, &err);
	c->cleaned = rc == 0;
	if (rc) {
		ah_log_warn("%s: cannot list /files/session: %s", c->tag, err.msg);
		if (rc == AH_ETIMEOUT)
			fail(c, "the call's timeout ran out before its outputs were collected: none kept");
		else
			fail(c, "the session's files could not be listed: none kept");
	} else {
		out_file *f = ah_alloc(c->a, k * sizeof *f);
		size_t n = parse_list(c->a, res.out, res.out_len, f, k);
		session_out(c, f, n, n == k, out);
	}
	ah_sandbox_result_free(&res);
}

/* Whether the call has an attachment the agent may write (saved back). */
static bool writable_attachment(json_object *att)
{
	for (size_t i = 0; att && i < json_object_array_length(att); i++)
		if (ah_rf_writable(json_object_array_get_idx(att, i)))
			return true;
	return false;
}

/* Whether the run left anything to collect, looked at through the keeper's
 * /proc root instead of a program in the sandbox (which costs a call ~10 ms):
 * with no writable attachment, an empty /files/session means nothing to do.
 * Read-only attachments are left in /files/agent: the next run's placing
 * (run_files.c) rebuilds or empties it. Without attachments, /files/agent
 * must be empty too (the agent may have written there: the listing clears
 * it). Anything unexpected (no such directories) means: collect. */
static bool nothing_to_collect(ah_sandbox *sb, json_object *files)
{
	json_object *att = ah_rf_arr(files, "attach");
	if (writable_attachment(att))
		return false;
	static const char *const session[] = {"files/session", NULL}, *const both[] = {"files/agent",
	                                                                               "files/session", NULL};
	return ah_rf_dirs_empty(sb, att && json_object_array_length(att) ? session : both);
}

static long long get_ll(json_object *o, const char *k, long long def)
{
	json_object *v;
	return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_int)
	           ? json_object_get_int64(v) : def;
}

/* The call's caps: the API's (its settings, the quota left) and the disk's. */
static void caps(struct collect *c, const ah_config *cfg, json_object *files)
{
	long long quota = get_ll(files, "collect_max", 0), set = get_ll(files, "max_bytes", quota);
	long long disk = ah_settings_of(cfg)->sandbox.disk_mb << 20;
	if (disk <= 0)
		disk = 1LL << 30; /* the sandbox's tmpfs (sandbox/mounts.c) */
	c->max_bytes = set, c->bytes_why = "session_output_max_bytes";
	if (disk < c->max_bytes)
		c->max_bytes = disk, c->bytes_why = "the size of the sandbox's disk";
	if (quota < c->max_bytes)
		c->max_bytes = quota < 0 ? 0 : quota, c->bytes_why = "the storage quota left";
	c->bytes_left = c->max_bytes;
	c->max_files = get_ll(files, "max_files", DEFAULT_MAX_FILES);
	if (c->max_files < 0 || c->max_files > MAX_FILES_LIMIT)
		c->max_files = DEFAULT_MAX_FILES;
	c->files_left = c->max_files;
}

void ah_run_files_out(const ah_config *cfg, ah_sandbox *sb, json_object *files, json_object *ans,
                      int64_t deadline, const char *tag)
{
	const ah_store *s = ah_run_files_store(cfg);
	json_object *fo = json_object_new_object(), *ses = json_object_new_array(),
	            *att = json_object_new_array();
	json_object_object_add(fo, "session", ses);
	json_object_object_add(fo, "attach", att);
	json_object_object_add(ans, "files_out", fo);
	if (!s || nothing_to_collect(sb, files))
		return;
	struct collect c = {.sb = sb, .s = s, .a = ah_arena_new(), .known = ah_rf_arr(files, "session"),
	                    .deadline = deadline, .tag = tag};
	caps(&c, cfg, files);
	/* Writable attachments first: they are the user's files already. */
	attach_out(&c, ah_rf_arr(files, "attach"), att);
	if (!c.error)
		list_and_take(&c, ses);
	if (!c.cleaned) { /* /files/agent goes all the same: the next run rebuilds it */
		ah_sandbox_result res;
		ah_err err;
		if (ah_rf_sh(sb, "rm -rf /files/agent; mkdir -p /files/agent", NULL, NULL, NULL, 0, -1, 4096,
		             ah_rf_now() + CLEANUP_MS, &res, &err) != 0)
			ah_log_warn("%s: cannot empty /files/agent: %s", tag, err.msg);
		ah_sandbox_result_free(&res);
	}
	if (c.error)
		json_object_object_add(fo, "error", json_object_new_string(c.error));
	ah_arena_destroy(c.a);
}
