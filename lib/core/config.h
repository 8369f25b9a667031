/* Service configuration: one `key = value` file (agenthost.conf), every key
 * overridable by an AGENTHOST_<KEY> environment variable. Read and validated
 * once at start-up against the table of config_keys.h: a key the table does not
 * know in the file, or a value that is not of its key's type and bounds, is a
 * load error naming the key. Environment variables that name no key are not
 * configuration (AGENTHOST_URL, AGENTHOST_VAR, ...) and are ignored. */
#ifndef AH_CORE_CONFIG_H
#define AH_CORE_CONFIG_H

#include "core/config_keys.h"
#include "core/err.h"
#include "core/settings.h"

#include <stdbool.h>

typedef struct ah_config ah_config;

/* path NULL: $AGENTHOST_CONFIG, else ./var/agenthost.conf if it exists, else
 * defaults and environment only. */
int ah_config_load(ah_config **out, const char *path, ah_err *err);
void ah_config_free(ah_config *c);

/* Value of a key (environment first, then file, then the table's default).
 * A NULL config reads the defaults. Never NULL: "" when unset. */
const char *ah_cfg_str(const ah_config *c, ah_cfg_key k);
/* As ah_cfg_str, NULL when unset or empty. */
const char *ah_cfg_opt(const ah_config *c, ah_cfg_key k);
/* INT: the number (within the key's bounds); BOOL: 0 or 1; MODE: the mode;
 * PRICE: micro-dollars. Parsed once, at load. */
long long ah_cfg_int(const ah_config *c, ah_cfg_key k);
bool ah_cfg_bool(const ah_config *c, ah_cfg_key k);
/* Whether the environment or the file gave the key a value. */
bool ah_cfg_is_set(const ah_config *c, ah_cfg_key k);
/* The file read (NULL: none, defaults and environment only). */
const char *ah_cfg_path(const ah_config *c);
/* The key called name, or -1 (for names built at run time: max_sessions_<plan>). */
int ah_cfg_find(const char *name);

#endif
