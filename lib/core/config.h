/* Service configuration: one `key = value` file (agenthost.conf), every key
 * overridable by an AGENTHOST_<KEY> environment variable. Read once at start-up. */
#ifndef AH_CORE_CONFIG_H
#define AH_CORE_CONFIG_H

#include "core/err.h"

typedef struct ah_config ah_config;

/* path NULL: $AGENTHOST_CONFIG, else ./var/agenthost.conf if it exists, else
 * defaults and environment only. */
int ah_config_load(ah_config **out, const char *path, ah_err *err);
void ah_config_free(ah_config *c);

/* Value of key (environment first, then file, then def). Never NULL unless def is. */
const char *ah_config_get(const ah_config *c, const char *key, const char *def);
/* Integer value; a value that is not an integer in [min,max] yields def and a log line. */
long long ah_config_int(const ah_config *c, const char *key, long long def,
                        long long min, long long max);

#endif
