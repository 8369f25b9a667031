/* Derived slugs, shared by every resource that has them (agents, buckets). */
#ifndef AH_HANDLERS_SLUG_H
#define AH_HANDLERS_SLUG_H

#include "http/http.h"

/* The slug derived from name (fallback when nothing is left of it), or with
 * -2, -3, … appended until taken_sql ("SELECT 1 … WHERE user_id = ? AND
 * slug = ?") finds no row for the caller. */
int ah_slug_free(ah_req *r, const char *taken_sql, const char *name, const char *fallback,
                 const char **out);

#endif
