/* Where the sandboxes' cgroups go: inside the runner's own cgroup, in every
 * hierarchy that holds one of our controllers (memory, cpu, pids), as
 * <mount>/<own cgroup>/<sandbox_cgroup>/slot<N>.
 *
 * Why its own: a systemd service may create cgroups only below the one it
 * was delegated (Delegate=yes); the rest of the tree is systemd's, and in a
 * container (systemd-nspawn, a v1 host) everything above is read-only. A
 * runner started from a shell makes them below the shell's cgroup, which on
 * a host without systemd is usually the root: the old fixed place.
 *
 * The own cgroup is read from /proc/self/cgroup, per hierarchy; mountinfo's
 * root field says which part of that hierarchy a mount shows (a container
 * may see only its subtree), so the path below the mount is the own path
 * minus that root.
 *
 * cgroup v2 hands controllers to children only from a cgroup without
 * processes of its own (the root excepted): when the own cgroup refuses
 * them (EBUSY), the runner moves itself into a leaf beside the sandboxes'
 * parent, <own>/<sandbox_cgroup>-runner, as systemd asks of a delegated
 * service. Runs in the runner (and the sandbox CLI), once, at start-up. */
#include "sandbox/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

enum { CG_N = 3 };
static const char *const NAMES[CG_N] = { "memory", "cpu", "pids" };

/* The lines of /proc/self/cgroup: "id:controllers:path". */
typedef struct own_line {
	char ctls[128], path[256];
} own_line;

typedef struct own_set {
	own_line l[24];
	int n;
} own_set;

/* True if the comma-separated list opts contains word. */
static bool has_word(const char *opts, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = opts; p && *p;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);
		if (l == wl && memcmp(p, word, wl) == 0)
			return true;
		p = c ? c + 1 : NULL;
	}
	return false;
}

static bool file_has_word(const char *path, const char *word)
{
	char buf[512] = "";
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool found = false;
	if (fgets(buf, sizeof buf, f)) {
		for (char *p = buf; *p; p++)
			if (*p == ' ' || *p == '\n')
				*p = ',';
		found = has_word(buf, word);
	}
	fclose(f);
	return found;
}

static int read_own(own_set *o, ah_err *err)
{
	char line[512];
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return ah_err_set(err, AH_EFAIL, "/proc/self/cgroup: %s", strerror(errno));
	o->n = 0;
	while (o->n < (int)(sizeof o->l / sizeof o->l[0]) && fgets(line, sizeof line, f)) {
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
		if (!b)
			continue;
		*b = '\0';
		b[1 + strcspn(b + 1, "\n")] = '\0';
		snprintf(o->l[o->n].ctls, sizeof o->l[o->n].ctls, "%s", a + 1);
		snprintf(o->l[o->n].path, sizeof o->l[o->n].path, "%s", b + 1);
		o->n++;
	}
	fclose(f);
	return 0;
}

/* The own path in the hierarchy of a v1 mount with controller ctl, or of
 * the v2 tree (ctl NULL: the line with no controllers). */
static const char *own_path(const own_set *o, const char *ctl)
{
	for (int i = 0; i < o->n; i++)
		if (ctl ? has_word(o->l[i].ctls, ctl) : o->l[i].ctls[0] == '\0')
			return o->l[i].path;
	return NULL;
}

/* <mnt><own minus the mount's root>, or -1 when the mount does not show the
 * own cgroup (a container's view of someone else's subtree). */
static int own_dir(char *out, size_t n, const char *mnt, const char *root, const char *own)
{
	size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
	if (rl && (strncmp(own, root, rl) != 0 || (own[rl] != '/' && own[rl] != '\0')))
		return -1;
	const char *rel = own + rl;
	if (strcmp(rel, "/") == 0)
		rel = "";
	return (size_t)snprintf(out, n, "%s%s", mnt, rel) < n ? 0 : -1;
}

/* One mountinfo line: root (field 4), mount point (5) and, after " - ", fs
 * type and super options. Fills sb_g.cg for a v1 hierarchy; v2dir for the
 * unified tree. */
static void scan_mount(char *line, const own_set *o, char v2dir[256])
{
	char *f[6] = { 0 }, *sep = strstr(line, " - ");
	if (!sep)
		return;
	*sep = '\0';
	char *p = line;
	for (int i = 0; i < 5 && p; i++) {
		f[i] = p;
		p = strchr(p, ' ');
		if (p)
			*p++ = '\0';
	}
	char *type = sep + 3, *src = strchr(type, ' ');
	if (!f[4] || !src)
		return;
	*src++ = '\0';
	char *opts = strchr(src, ' ');
	if (!opts)
		return;
	opts++;
	opts[strcspn(opts, "\n")] = '\0';
	const char *own;
	char dir[256];
	if (strcmp(type, "cgroup2") == 0 && !v2dir[0] && (own = own_path(o, NULL)) &&
	    own_dir(dir, sizeof dir, f[4], f[3], own) == 0)
		snprintf(v2dir, 256, "%s", dir);
	if (strcmp(type, "cgroup") != 0)
		return;
	for (int i = 0; i < CG_N; i++)
		if (has_word(opts, NAMES[i]) && !sb_g.cg[i].path[0] && (own = own_path(o, NAMES[i])) &&
		    own_dir(dir, sizeof dir, f[4], f[3], own) == 0)
			snprintf(sb_g.cg[i].path, sizeof sb_g.cg[i].path, "%.180s/%s", dir, sb_g.cg_name);
}

/* Each distinct directory once: mkdir, and the list the keeper joins. */
static int make_parents(ah_err *err)
{
	sb_g.cg_nhier = 0;
	for (int i = 0; i < CG_N; i++) {
		int j = 0;
		while (j < sb_g.cg_nhier && strcmp(sb_g.cg[sb_g.cg_hier[j]].path, sb_g.cg[i].path) != 0)
			j++;
		if (j < sb_g.cg_nhier)
			continue;
		sb_g.cg_hier[sb_g.cg_nhier++] = i;
		if (mkdir(sb_g.cg[i].path, 0755) < 0 && errno != EEXIST)
			return ah_err_set(err, AH_EFAIL,
			                  "mkdir %s: %s (sandboxes' cgroups go inside the runner's own: "
			                  "run it where that is writable, e.g. a systemd unit with Delegate=yes)",
			                  sb_g.cg[i].path, strerror(errno));
	}
	return 0;
}

/* v2's no-internal-processes rule: move into <own>/<sandbox_cgroup>-runner. */
static int move_self(const char *own, ah_err *err)
{
	char dir[320], path[340];
	snprintf(dir, sizeof dir, "%s/%s-runner", own, sb_g.cg_name);
	snprintf(path, sizeof path, "%s/cgroup.procs", dir);
	if ((mkdir(dir, 0755) < 0 && errno != EEXIST) || sb_write_file(path, "0") < 0)
		return ah_err_set(err, AH_EFAIL, "move the runner into %s: %s", dir, strerror(errno));
	return 0;
}

/* The unified tree: our controllers enabled in the own cgroup (for the
 * parent) and in the parent (for the slots). */
static int init_v2(const char *own, ah_err *err)
{
	char path[300], want[64] = "";
	for (int i = 0; i < CG_N; i++)
		if (sb_g.cg[i].v2)
			snprintf(want + strlen(want), sizeof want - strlen(want), "%s+%s",
			         want[0] ? " " : "", NAMES[i]);
	snprintf(path, sizeof path, "%s/cgroup.subtree_control", own);
	int rc = sb_write_file(path, want);
	if (rc < 0 && errno == EBUSY) {
		if ((rc = move_self(own, err)))
			return rc;
		rc = sb_write_file(path, want);
	}
	if (rc < 0)
		return ah_err_set(err, AH_EFAIL, "enable %s in %s: %s%s", want, path, strerror(errno),
		                  errno == EBUSY ? " (other processes share the runner's cgroup: it needs "
		                                   "one of its own, e.g. a systemd unit with Delegate=yes)"
		                                 : "");
	snprintf(path, sizeof path, "%.180s/%s/cgroup.subtree_control", own, sb_g.cg_name);
	if (sb_write_file(path, want) < 0)
		return ah_err_set(err, AH_EFAIL, "enable %s in %s: %s", want, path, strerror(errno));
	return 0;
}

int sb_cgroup_init(ah_err *err)
{
	char v2[256] = "", line[2048], ctl[300];
	own_set own;
	int rc = read_own(&own, err);
	if (rc)
		return rc;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return ah_err_set(err, AH_EFAIL, "mountinfo: %s", strerror(errno));
	memset(sb_g.cg, 0, sizeof sb_g.cg);
	while (fgets(line, sizeof line, f))
		scan_mount(line, &own, v2);
	fclose(f);
	/* A hybrid host mounts cgroup2 without controllers: then v1 rules. A
	 * controller is in the unified tree only when no v1 hierarchy has it and
	 * the own cgroup there was given it. */
	snprintf(ctl, sizeof ctl, "%s/cgroup.controllers", v2);
	bool any_v2 = false;
	for (int i = 0; i < CG_N; i++) {
		if (sb_g.cg[i].path[0])
			continue;
		if (!v2[0] || !file_has_word(ctl, NAMES[i]))
			return ah_err_set(err, AH_EFAIL, "no cgroup %s controller for the runner's cgroup "
			                  "(v1 or v2)%s%s", NAMES[i], v2[0] ? ": " : "", v2);
		snprintf(sb_g.cg[i].path, sizeof sb_g.cg[i].path, "%.180s/%s", v2, sb_g.cg_name);
		sb_g.cg[i].v2 = any_v2 = true;
	}
	rc = make_parents(err);
	return rc ? rc : any_v2 ? init_v2(v2, err) : 0;
}

/* "v1", "v2" or "v1+v2", for the start-up log line. */
const char *sb_cgroup_layout(void)
{
	int n2 = 0;
	for (int i = 0; i < CG_N; i++)
		n2 += sb_g.cg[i].v2;
	return n2 == 0 ? "v1" : n2 == CG_N ? "v2" : "v1+v2";
}

/* The sandboxes' parent in the memory hierarchy, for the start-up line. */
const char *sb_cgroup_parent(void)
{
	return sb_g.cg[0].path;
}
