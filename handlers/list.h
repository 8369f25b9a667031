/* The one shape of every list endpoint: a bare JSON array of one page plus
 * X-Total-Count, paged by ?limit (1–100, default 20) and ?offset, and — on the
 * lists that grow without bound — by an opaque ?cursor as well: keyset pages
 * that new rows never shift, announced by Link: <…>; rel="next" (RFC 8288) and
 * X-Next-Cursor. */
#ifndef AH_HANDLERS_LIST_H
#define AH_HANDLERS_LIST_H

#include "http/http.h"

/* One row of the page as JSON (rows->len gives byte lengths of binary cells). */
typedef json_object *(*ah_row_json_fn)(ah_req *r, const ah_rows *rows, size_t i);

/* count_sql and list_sql filter on one parameter, owner; list_sql ends with
 * LIMIT ? OFFSET ?. Bad paging answers 422 itself (AH_EDONE). For short lists
 * (secrets, mounts, buckets). */
int ah_list_reply(ah_req *r, const char *count_sql, const char *list_sql, const char *owner,
                  ah_row_json_fn to_json);

/* A list with keyset pages. Every SQL text binds the owner, then the filters (at
 * most AH_LIST_MAX_FILTERS strings), then its paging values:
 *   page_sql   LIMIT ? OFFSET ?   — a deferred join: the ids from the covering
 *                                   index first, the rows for those ids after;
 *   after_sql  ? ? ? LIMIT ?      — (time, time, id) of the cursor, as
 *                                   "t <= ? AND (t < ? OR id < ?)" (>= and > for
 *                                   an ascending list): the first term is the
 *                                   index range, the rest skips the cursor's row
 *                                   and its ties up to it. FORCE INDEX the
 *                                   (owner, time) index: with ORDER BY … LIMIT
 *                                   MariaDB 10.11 otherwise trades the range
 *                                   for a ref walk from the newest row (1 s
 *                                   instead of 10 ms 150,000 rows deep);
 *   rev_sql    LIMIT ? OFFSET ?   — optional: page_sql with the inner order
 *                                   reversed (the outer one kept), for an offset
 *                                   past half of the list (as counted, with its
 *                                   filters): the walk starts from the end
 *                                   nearer to it;
 *   count_sql  (nothing)          — used when count_kind is NULL;
 *   changes_sql ?                 — optional, with count_sql: the owner → a
 *                                   number every change of the list's rows
 *                                   bumps; while it stands, the worker reuses
 *                                   its last count_sql answer for the same
 *                                   arguments instead of counting again;
 *   locate_sql ?                  — optional, with below_sql, for offsets at
 *                                   least AH_LIST_LOCATE_MIN from both ends of
 *                                   an unfiltered list: the offset → one row
 *                                   (bound, before):
 *                                   the page's first row sorts below the time
 *                                   bound, after `before` rows that do not;
 *   below_sql  ? LIMIT ? OFFSET ? — page_sql below that bound (time < ?).
 * count_kind names the list_counts row (schema/014_list_counts.sql) keyed by the
 * owner. time_col and id_col are the sort key's columns in the rows. The first
 * page (no cursor, offset 0) is after_sql from a cursor before every row: a
 * range read of limit + 1 rows, half the cost of the deferred join's two
 * steps; ascending tells which end that is.
 * scope_counted: the route's scope reads the list's count and change counter
 * with the key (r->scope_extra, e.g. ah_agent_history_scope), so no page
 * counts, and each worker keeps the first page it answered and answers it
 * again while the counter stands (one query for the whole request). */
#define AH_LIST_MAX_FILTERS 4
#define AH_LIST_LOCATE_MIN 1000
typedef struct ah_list {
	const char *page_sql, *after_sql, *count_sql, *count_kind, *rev_sql, *locate_sql, *below_sql,
	           *changes_sql;
	size_t time_col, id_col;
	bool ascending, scope_counted;
	ah_row_json_fn to_json;
} ah_list;

int ah_list_keyset(ah_req *r, const ah_list *l, const char *owner, const char *const *filters,
                   size_t nfilters);

/* Just the validation of ?limit, ?offset and ?cursor, for handlers that answer
 * 422 before they touch anything else. */
int ah_list_check(ah_req *r);

#endif
