/* Bucket mounts on a runner: rclone FUSE filesystems the runner starts outside
 * any sandbox and binds into the agent's sandboxes (lib/sandbox's binds).
 *
 * A deploy writes the agent's enabled mounts, with their opened credentials,
 * into a plan file next to the image (<image>.mounts, 0600 in the 0700 data
 * directory; never inside the image, which the sandbox sees), after a real
 * request to each bucket (lib/buckets' probe) so that a bad credential fails
 * the deploy with a message rather than the agent's reads. The plan is what
 * a deploy applies: later changes wait for the next deploy (needs_redeploy).
 * A runner that takes the agent over (images.c) writes its own plan the same
 * way, before the adopted image is in place.
 *
 * One rclone process per mount of an agent serves all of the agent's
 * sandboxes on this runner. It runs with a clean environment (the host's, e.g.
 * AWS_CA_BUNDLE, would change its behaviour) that carries the credentials:
 * never its argv, never a file the sandbox can reach. It is stopped when the
 * agent is redeployed without the mount (or with it changed), deleted or
 * stopped, and when no sandbox of the agent has used it for
 * mount_idle_seconds. A process that died makes the next invocation fail with
 * an error naming the mount (its sandbox goes, the next call starts anew);
 * its mount answers ENOTCONN meanwhile, never hangs. */
#ifndef AH_RUNNER_FUSE_H
#define AH_RUNNER_FUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/config.h"
#include "core/err.h"
#include "db/db.h"
#include "sandbox/sandbox.h"

/* Once, at start: settings, and mounts a previous runner left behind go. */
int ah_fuse_init(const ah_config *cfg, const char *data_dir, ah_err *err);
/* Stops every rclone process (runner shutdown). */
void ah_fuse_shutdown(void);

/* Deploy and takeover: writes <image_dir>.mounts for the agent's enabled
 * mounts (none: no file), replacing it by a rename; any thread. AH_EINVALID
 * with a message naming the mount when one cannot work (no credentials, the
 * bucket test fails). */
int ah_fuse_plan_write(ah_db *db, ah_arena *a, const struct ah_config *cfg, const char *agent_id,
                       const char *image_dir, ah_err *err);

/* Who asks for a plan's mounts, which decides what a dead process means:
 * a call fails naming the mount (and the next one mounts it anew); a spare
 * built ahead leaves it for the next call to report; a deploy starts it anew. */
enum ah_fuse_for { AH_FUSE_FOR_CALL, AH_FUSE_FOR_SPARE, AH_FUSE_FOR_DEPLOY };

/* The binds of a sandbox of the agent over image: each mount of its plan,
 * its rclone started when not running. *out is malloc'ed (free with
 * ah_fuse_binds_free); none: NULL, 0. Fails naming the mount: AH_EMOUNT
 * when the message is the user's (it names the mount and bucket), else AH_EFAIL. */
int ah_fuse_binds(const char *agent_id, const char *image, enum ah_fuse_for who,
                  ah_sandbox_bind **out, size_t *n, ah_err *err);
void ah_fuse_binds_free(ah_sandbox_bind *b, size_t n);
/* Before a call in an existing sandbox: every mount of the plan still
 * served. Fails naming the mount whose process died (AH_EMOUNT). */
int ah_fuse_check(const char *agent_id, const char *image, ah_err *err);

/* Stops the agent's processes that image's plan does not name (NULL: all). */
void ah_fuse_retain(const char *agent_id, const char *image);
/* Stops processes idle for idle_ms whose agent has no sandbox here. */
void ah_fuse_reap_idle(int64_t idle_ms);

#endif
