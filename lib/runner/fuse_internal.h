/* Shared by fuse.c (the registry) and fuse_proc.c (one rclone process). */
#ifndef AH_RUNNER_FUSE_INTERNAL_H
#define AH_RUNNER_FUSE_INTERNAL_H

#include <json-c/json.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/err.h"
#include "core/netaddr.h"

struct ah_fuse_guard;

struct ah_fuse_proc {
	char agent[33];
	char key[96];            /* mount id, '-', a hash of its plan entry */
	char dir[PATH_MAX];      /* the mount point: <data_dir>/mounts/<agent>/<key> */
	char path[256];          /* mount_path inside, and the bucket: for messages */
	char slug[64];
	bool read_only;
	pid_t pid;
	int pidfd;
	struct ah_fuse_guard *guard; /* its connections' check; NULL when not running */
	bool starting;           /* listed, its start under way outside the lock: wait */
	int64_t last_used_ms;
	struct ah_fuse_proc *next;
};

/* Starts rclone for plan entry e at p->dir and waits until it serves; on
 * failure everything is undone and err names the mount. retries: its
 * --low-level-retries (mount_low_level_retries). */
int ah_fuse_proc_start(struct ah_fuse_proc *p, json_object *e, const char *rclone, int retries,
                       const ah_addr_policy *pol, ah_err *err);
/* The process runs and its mount answers. */
bool ah_fuse_proc_alive(const struct ah_fuse_proc *p);
/* SIGTERM (rclone unmounts), SIGKILL after a grace, the mount detached. */
void ah_fuse_proc_stop(struct ah_fuse_proc *p);

/* ---- fuse_guard.c: every connect() of an rclone, checked as it is made ----
 * The policy (storage_allow_hosts: no link-local, metadata or unlisted
 * private address), and, when the tenant named the host (endpoint_url, a GCS
 * key's token_uri), only that host's port and current addresses. */

/* The hosts of plan entry e resolved and checked now: AH_EDENIED or
 * AH_EINVALID with a sentence when they cannot work. who names the mount in
 * log lines. */
int ah_fuse_guard_new(struct ah_fuse_guard **out, json_object *e, const ah_addr_policy *pol,
                      const char *who, ah_err *err);
/* In the child, between fork and exec: installs the filter and sends its
 * listener over sock. -1: the child must not exec. */
int ah_fuse_guard_child(int sock);
/* In the runner: takes the listener from sock and starts the thread that
 * answers it. */
int ah_fuse_guard_start(struct ah_fuse_guard *g, int sock, ah_err *err);
/* After the process is gone (or never started): the thread stops, all goes. */
void ah_fuse_guard_free(struct ah_fuse_guard *g);

#endif
