/* Commands of agenthost-admin; each returns a process exit status. */
#ifndef AH_ADMIN_ADMIN_H
#define AH_ADMIN_ADMIN_H

#include "core/arena.h"
#include <stdbool.h>
#include "core/config.h"
#include "db/db.h"

typedef struct ah_admin {
	ah_config *cfg;
	ah_db *db;
	ah_arena *arena;
} ah_admin;

int ah_admin_migrate(ah_admin *ad);
/* Loads the configuration (path NULL: the programs' default) and says what
 * is wrong, or which keys of the example (NULL: the installed one) the file
 * lacks; opens nothing else. */
int ah_admin_config_check(const char *path, const char *example);
/* plan: free|pro|enterprise; quota_bytes: NULL for the plan's. */
int ah_admin_user_create(ah_admin *ad, const char *email, const char *plan,
                         const char *quota_bytes);
int ah_admin_user_set_disabled(ah_admin *ad, const char *email, int disabled);
int ah_admin_user_identities(ah_admin *ad, const char *email);
int ah_admin_user_unlink(ah_admin *ad, const char *email, const char *issuer, const char *subject);
/* Deletes the user with everything of theirs (agents, history, files and
 * their bytes, keys, buckets); only with confirmed (--yes). */
int ah_admin_user_delete(ah_admin *ad, const char *email, bool confirmed);
int ah_admin_key_create(ah_admin *ad, const char *email, const char *name);
/* Deletes invocations older than days (NULL: history_retention_days) in
 * batches until none is left; prints how many. */
int ah_admin_purge_history(ah_admin *ad, const char *days);

#endif
