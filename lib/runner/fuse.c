/* The registry of rclone processes (see fuse.h): which mount of which agent
 * is served where, started on first need and stopped when no longer named.
 * One mutex guards the list (lock order: lockorder.h). A process is started
 * (up to 10 s) outside it: listed as starting under the lock, started, then
 * published under the lock; a call that needs the same mount waits for it
 * (cond started), other agents' calls go on. */
#include "runner/fuse.h"
#include "runner/fuse_internal.h"
#include "runner/lockorder.h"
#include "runner/sandboxes.h"
#include "buckets/buckets.h"
#include "core/log.h"
#include "core/util.h"
#include "deploy/deploy.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t started = PTHREAD_COND_INITIALIZER; /* a start ended */
static struct ah_fuse_proc *procs;
static struct {
	char root[PATH_MAX];     /* <data_dir>/mounts */
	char rclone[PATH_MAX];
	int retries;             /* rclone's --low-level-retries */
	ah_addr_policy policy;
} g;

/* Mount points under root that a previous runner left: detached. */
static void detach_leftovers(void)
{
	FILE *f = fopen("/proc/self/mounts", "re");
	char line[PATH_MAX * 2], dev[256], at[PATH_MAX];
	size_t n = strlen(g.root);
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%255s %4095s", dev, at) == 2 && strncmp(at, g.root, n) == 0 &&
		    at[n] == '/')
			umount2(at, MNT_DETACH);
	if (f)
		fclose(f);
}

/* rclone processes a previous runner of this data directory left (killed
 * before it could stop them): their mount point, argv[3], is under root. */
static void kill_leftovers(void)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	size_t n = strlen(g.root);
	while (d && (de = readdir(d))) {
		char path[300], argv[PATH_MAX * 2];
		long long pid;
		if (ah_parse_ll(&pid, de->d_name) != 0 || pid <= 1)
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		FILE *f = fopen(path, "re");
		size_t len = f ? fread(argv, 1, sizeof(argv) - 1, f) : 0;
		if (f)
			fclose(f);
		argv[len] = '\0';
		const char *a = argv;
		for (int i = 0; i < 3 && a < argv + len; i++)
			a += strlen(a) + 1;
		size_t l0 = strlen(argv);
		if (a < argv + len && l0 >= 6 && strcmp(argv + l0 - 6, "rclone") == 0 &&
		    strncmp(a, g.root, n) == 0 && a[n] == '/')
			kill((pid_t)pid, SIGKILL);
	}
	if (d)
		closedir(d);
}

int ah_fuse_init(const ah_config *cfg, const char *data_dir, ah_err *err)
{
	snprintf(g.root, sizeof(g.root), "%s/mounts", data_dir);
	snprintf(g.rclone, sizeof(g.rclone), "%s", ah_settings_of(cfg)->buckets.rclone);
	g.retries = (int)ah_settings_of(cfg)->buckets.mount_low_level_retries;
	g.policy = ah_bucket_policy(cfg);
	procs = NULL;
	kill_leftovers();
	detach_leftovers();
	ah_deploy_rmtree(g.root);
	return ah_deploy_mkdirs(g.root, err);
}

/* The plan of image, or NULL when it has no mounts. */
static json_object *load_plan(const char *image)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s.mounts", image);
	json_object *o = json_object_from_file(path);
	if (o && !json_object_is_type(o, json_type_array)) {
		json_object_put(o);
		o = NULL;
	}
	return o;
}

static const char *entry_str(json_object *e, const char *k)
{
	json_object *v;
	return json_object_object_get_ex(e, k, &v) ? json_object_get_string(v) : "";
}

/* "<mount id>-<hash of the entry>": a changed mount is another process. */
static void entry_key(char *out, size_t n, json_object *e)
{
	unsigned char h[8];
	char hex[17];
	const char *text = json_object_to_json_string_ext(e, JSON_C_TO_STRING_PLAIN);
	crypto_generichash(h, sizeof(h), (const unsigned char *)text, strlen(text), NULL, 0);
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	snprintf(out, n, "%.40s-%s", entry_str(e, "id"), hex);
}

static struct ah_fuse_proc *find(const char *agent, const char *key)
{
	for (struct ah_fuse_proc *p = procs; p; p = p->next)
		if (strcmp(p->agent, agent) == 0 && strcmp(p->key, key) == 0)
			return p;
	return NULL;
}

static void unlist(struct ah_fuse_proc *p)
{
	for (struct ah_fuse_proc **q = &procs; *q; q = &(*q)->next)
		if (*q == p) {
			*q = p->next;
			break;
		}
}

static void drop(struct ah_fuse_proc *p)
{
	unlist(p);
	ah_fuse_proc_stop(p);
	free(p);
}

/* Lock held. Waits until no process of agent (NULL: any) is being started. */
static void wait_starts(const char *agent)
{
	for (bool any = true; any;) {
		any = false;
		for (struct ah_fuse_proc *p = procs; p && !any; p = p->next)
			any = p->starting && (!agent || strcmp(p->agent, agent) == 0);
		if (any)
			pthread_cond_wait(&started, &mu);
	}
}

/* Lock held, and let go meanwhile. Starts p (listed as starting, so that
 * nobody else starts, uses or stops it) with no lock held. */
static int start_unlocked(struct ah_fuse_proc *p, json_object *e, ah_err *err)
{
	p->starting = true;
	p->next = procs;
	procs = p;
	ah_unlock(&mu, AH_LOCK_FUSE);
	int rc = ah_fuse_proc_start(p, e, g.rclone, g.retries, &g.policy, err);
	ah_lock(&mu, AH_LOCK_FUSE);
	p->starting = false;
	pthread_cond_broadcast(&started);
	if (rc != 0) { /* undone already (fuse_internal.h) */
		unlist(p);
		free(p);
	}
	return rc;
}

/* The process of entry e, started when start and not running. A dead one:
 * see enum ah_fuse_for. */
static int serve(const char *agent, json_object *e, bool start, enum ah_fuse_for who,
                 struct ah_fuse_proc **out, ah_err *err)
{
	char key[96];
	entry_key(key, sizeof(key), e);
	struct ah_fuse_proc *p;
	while ((p = find(agent, key)) && p->starting) /* another call's start: its result */
		pthread_cond_wait(&started, &mu);
	if (p && !ah_fuse_proc_alive(p) && who == AH_FUSE_FOR_SPARE)
		return ah_err_set(err, AH_EMOUNT, "Bucket mount at %s: its FUSE process is gone", p->path);
	if (p && !ah_fuse_proc_alive(p) && who == AH_FUSE_FOR_DEPLOY) {
		drop(p);
		p = NULL;
	}
	if (p && !ah_fuse_proc_alive(p)) {
		ah_err_set(err, AH_EMOUNT, "Bucket mount at %s (bucket '%s') failed: its FUSE process "
		           "(rclone) is gone; the next call mounts it again", p->path, p->slug);
		ah_log_warn("agent=%s: %s", agent, err->msg);
		drop(p);
		return AH_EMOUNT;
	}
	if (!p && !start)
		return ah_err_set(err, AH_EMOUNT, "Bucket mount at %s (bucket '%s') is not mounted",
		                  entry_str(e, "path"), entry_str(e, "slug"));
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return ah_err_set(err, AH_EFAIL, "out of memory");
		snprintf(p->agent, sizeof(p->agent), "%s", agent);
		snprintf(p->key, sizeof(p->key), "%s", key);
		if ((size_t)snprintf(p->dir, sizeof(p->dir), "%s/%s/%s", g.root, agent, key) >=
		    sizeof(p->dir) - 16) {
			free(p);
			return ah_err_set(err, AH_EFAIL, "mount directory path too long");
		}
		snprintf(p->path, sizeof(p->path), "%s", entry_str(e, "path"));
		snprintf(p->slug, sizeof(p->slug), "%s", entry_str(e, "slug"));
		json_object *ro;
		p->read_only = json_object_object_get_ex(e, "read_only", &ro) && json_object_get_boolean(ro);
		p->pid = p->pidfd = -1;
		int rc = start_unlocked(p, e, err);
		if (rc != 0)
			return rc;
		ah_log_info("agent=%s: bucket '%s' mounted for %s (rclone pid %d)", agent, p->slug,
		            p->path, (int)p->pid);
	}
	p->last_used_ms = ah_now_ms();
	*out = p;
	return 0;
}

void ah_fuse_binds_free(ah_sandbox_bind *b, size_t n)
{
	for (size_t i = 0; b && i < n; i++) {
		free((char *)b[i].host_dir);
		free((char *)b[i].path);
	}
	free(b);
}

/* Every entry of image's plan served; with binds, their list. */
static int serve_plan(const char *agent, const char *image, bool start, enum ah_fuse_for who,
                      ah_sandbox_bind **out, size_t *n, ah_err *err)
{
	json_object *plan = load_plan(image);
	size_t len = plan ? json_object_array_length(plan) : 0;
	ah_sandbox_bind *b = out && len ? calloc(len, sizeof(*b)) : NULL;
	int rc = out && len && !b ? ah_err_set(err, AH_EFAIL, "out of memory") : 0;
	ah_lock(&mu, AH_LOCK_FUSE);
	for (size_t i = 0; i < len && rc == 0; i++) {
		struct ah_fuse_proc *p = NULL;
		rc = serve(agent, json_object_array_get_idx(plan, i), start, who, &p, err);
		if (rc == 0 && b) {
			b[i] = (ah_sandbox_bind){strdup(p->dir), strdup(p->path), p->read_only};
			if (!b[i].host_dir || !b[i].path)
				rc = ah_err_set(err, AH_EFAIL, "out of memory");
		}
	}
	ah_unlock(&mu, AH_LOCK_FUSE);
	if (plan)
		json_object_put(plan);
	if (rc != 0 || !out) {
		ah_fuse_binds_free(b, len);
		return rc;
	}
	*out = b;
	*n = len;
	return 0;
}

int ah_fuse_binds(const char *agent_id, const char *image, enum ah_fuse_for who,
                  ah_sandbox_bind **out, size_t *n, ah_err *err)
{
	*out = NULL;
	*n = 0;
	return serve_plan(agent_id, image, true, who, out, n, err);
}

int ah_fuse_check(const char *agent_id, const char *image, ah_err *err)
{
	return serve_plan(agent_id, image, false, AH_FUSE_FOR_CALL, NULL, NULL, err);
}

void ah_fuse_retain(const char *agent_id, const char *image)
{
	json_object *plan = image ? load_plan(image) : NULL;
	size_t len = plan ? json_object_array_length(plan) : 0;
	ah_lock(&mu, AH_LOCK_FUSE);
	wait_starts(agent_id); /* one being started is stopped too when not named */
	for (struct ah_fuse_proc *p = procs, *next; p; p = next) {
		next = p->next;
		bool named = false;
		for (size_t i = 0; i < len && !named; i++) {
			char key[96];
			entry_key(key, sizeof(key), json_object_array_get_idx(plan, i));
			named = strcmp(key, p->key) == 0;
		}
		if (strcmp(p->agent, agent_id) == 0 && !named) {
			ah_log_info("agent=%s: bucket '%s' at %s unmounted", p->agent, p->slug, p->path);
			drop(p);
		}
	}
	ah_unlock(&mu, AH_LOCK_FUSE);
	if (plan)
		json_object_put(plan);
}

void ah_fuse_reap_idle(int64_t idle_ms)
{
	int64_t now = ah_now_ms();
	ah_lock(&mu, AH_LOCK_FUSE);
	for (struct ah_fuse_proc *p = procs, *next; p; p = next) {
		next = p->next;
		if (!p->starting && now - p->last_used_ms >= idle_ms &&
		    ah_sandboxes_agent_count(p->agent) == 0) {
			ah_log_info("agent=%s: bucket '%s' at %s unmounted (idle)", p->agent, p->slug, p->path);
			drop(p);
		}
	}
	ah_unlock(&mu, AH_LOCK_FUSE);
}

void ah_fuse_shutdown(void)
{
	ah_lock(&mu, AH_LOCK_FUSE);
	wait_starts(NULL);
	while (procs)
		drop(procs);
	ah_unlock(&mu, AH_LOCK_FUSE);
}
