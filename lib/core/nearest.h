/* "Did you mean": the edit distance of two short names, for the client's
 * unknown options (lib/cli/args.c) and the configuration's unknown keys
 * (lib/core/config.c). */
#ifndef AH_CORE_NEAREST_H
#define AH_CORE_NEAREST_H

#include <stddef.h>

/* Levenshtein distance of a and b; 64 when either is 63 bytes or longer
 * (names are short: far beyond any suggestion). */
size_t ah_edit_distance(const char *a, const char *b);

#endif
