/* The input validators of the agent and invoke handlers, pure functions of
 * their input so that tests/unit/test_validate.c can try them one by one. */
#ifndef AH_HANDLERS_VALIDATE_H
#define AH_HANDLERS_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/arena.h"
#include "core/project.h"   /* ah_slug_valid, the slug rule the client shares */

/* https://, http://, ssh://, git:// URLs or scp-like user@host:path. */
bool ah_repo_url_valid(const char *u);

/* What git check-ref-format would accept as a branch or tag name, in brief. */
bool ah_branch_valid(const char *b);

/* ^[A-Za-z0-9._:-]{1,128}$ */
bool ah_session_id_valid(const char *s);

/* ah_slug_from_name, with "agent" when nothing is left. In arena a. */
char *ah_slugify(ah_arena *a, const char *name, size_t max);

/* What is wrong with a mount path (absolute, normalised, not '/', not under
 * the sandbox's own or the service's directories), or NULL when it is fine. */
const char *ah_bucket_mount_path_problem(const char *p);
extern const char *const ah_mount_reserved_message;
/* p is dir or below it. */
bool ah_path_within(const char *p, const char *dir);
/* A source_prefix: relative, no '.' or '..' segments; NULL when fine. */
const char *ah_source_prefix_problem(const char *p);

#endif
