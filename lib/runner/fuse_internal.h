/* Shared by fuse.c (the registry) and fuse_proc.c (one rclone process). */
#ifndef AH_RUNNER_FUSE_INTERNAL_H
#define AH_RUNNER_FUSE_INTERNAL_H

#include <json-c/json.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/err.h"

struct ah_fuse_proc {
	char agent[33];
	char key[96];            /* mount id, '-', a hash of its plan entry */
	char dir[PATH_MAX];      /* the mount point: <data_dir>/mounts/<agent>/<key> */
	char path[256];          /* mount_path inside, and the bucket: for messages */
	char slug[64];
	bool read_only;
	pid_t pid;
	int pidfd;
	int64_t last_used_ms;
	struct ah_fuse_proc *next;
};

/* Starts rclone for plan entry e at p->dir and waits until it serves; on
 * failure everything is undone and err names the mount. */
int ah_fuse_proc_start(struct ah_fuse_proc *p, json_object *e, const char *rclone,
                       bool allow_private, ah_err *err);
/* The process runs and its mount answers. */
bool ah_fuse_proc_alive(const struct ah_fuse_proc *p);
/* SIGTERM (rclone unmounts), SIGKILL after a grace, the mount detached. */
void ah_fuse_proc_stop(struct ah_fuse_proc *p);

#endif
