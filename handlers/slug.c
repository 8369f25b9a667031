/* See slug.h. */
#include "slug.h"
#include "validate.h"

#include <stdio.h>
#include <string.h>

int ah_slug_free(ah_req *r, const char *taken_sql, const char *name, const char *fallback,
                 const char **out)
{
	/* ah_slugify's own fallback is "agent": a bucket named "!!!" is "bucket". */
	bool any = false;
	for (const char *p = name; *p; p++)
		any |= (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
	const char *base = any ? ah_slugify(r->arena, name, 63) : fallback;
	for (int i = 1; i < 10000; i++) {
		const char *cand = base;
		if (i > 1) {
			char suffix[16];
			snprintf(suffix, sizeof(suffix), "-%d", i);
			cand = ah_sprintf(r->arena, "%s%s", ah_slugify(r->arena, base, 63 - strlen(suffix)),
			                  suffix);
		}
		ah_rows rows;
		if (ah_db_query(r->db, r->arena, &rows, taken_sql, "ss", r->user->id, cand) != 0)
			return AH_EFAIL;
		if (rows.n == 0) {
			*out = cand;
			return 0;
		}
	}
	return AH_ECONFLICT;
}
