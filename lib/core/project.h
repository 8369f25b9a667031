/* An agent project's names, the one copy the client (lib/cli) and the service
 * (handlers, lib/deploy) share: the slug rule, the slug derived from a name,
 * and the manifest's file names in the order they are looked for. */
#ifndef AH_CORE_PROJECT_H
#define AH_CORE_PROJECT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/arena.h"

#define AH_SLUG_MAX 63

/* ^[a-z0-9]+(-[a-z0-9]+)*$, 1 to AH_SLUG_MAX characters. */
bool ah_slug_valid(const char *s);

/* The slug of a name: ASCII letters and digits lowercased, each run of other
 * bytes one '-', none at either end, cut to max characters (and trimmed
 * again). "" when the name has no letter or digit. In arena a. */
char *ah_slug_from_name(ah_arena *a, const char *name, size_t max);

/* "agent.json", then "castari.json" (the older name, read when the first is
 * absent); NULL-terminated. */
extern const char *const ah_manifest_names[];
/* Room for the longest of them with its NUL. */
#define AH_MANIFEST_NAME_CAP 16

#endif
