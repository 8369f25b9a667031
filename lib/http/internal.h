/* Helpers shared by the lib/http sources only. */
#ifndef AH_HTTP_INTERNAL_H
#define AH_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/arena.h"

/* Percent-decodes n bytes of s; '+' becomes a space when plus_is_space (query). */
char *ah_url_decode(ah_arena *a, const char *s, size_t n, bool plus_is_space, size_t *outlen);

#endif
