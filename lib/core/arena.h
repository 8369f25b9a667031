/* A request-scoped arena: handlers allocate from it and never free. Things that
 * are not plain memory (json-c objects, result sets, file descriptors) register a
 * cleanup hook that runs, newest first, when the arena is reset or destroyed. */
#ifndef AH_CORE_ARENA_H
#define AH_CORE_ARENA_H

#include <stddef.h>

typedef struct ah_arena ah_arena;
typedef void (*ah_cleanup_fn)(void *);

ah_arena *ah_arena_new(void);
void ah_arena_destroy(ah_arena *a);
/* Runs the hooks and frees every block but the first, ready for the next request. */
void ah_arena_reset(ah_arena *a);

/* Zeroed memory; aborts on out-of-memory (the only sane reaction in a worker). */
void *ah_alloc(ah_arena *a, size_t n);
char *ah_strdup(ah_arena *a, const char *s);
char *ah_strndup(ah_arena *a, const char *s, size_t n);
char *ah_sprintf(ah_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ah_arena_on_cleanup(ah_arena *a, ah_cleanup_fn fn, void *p);

#endif
