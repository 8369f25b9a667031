/* The one shape of every list endpoint: a bare JSON array of one page plus
 * X-Total-Count, paged by ?limit (1–100, default 20) and ?offset. */
#ifndef AH_HANDLERS_LIST_H
#define AH_HANDLERS_LIST_H

#include "http/http.h"

/* One row of the page as JSON (rows->len gives byte lengths of binary cells). */
typedef json_object *(*ah_row_json_fn)(ah_req *r, const ah_rows *rows, size_t i);

/* count_sql and list_sql filter on one parameter, owner; list_sql ends with
 * LIMIT ? OFFSET ?. Bad paging answers 422 itself (AH_EDONE). */
int ah_list_reply(ah_req *r, const char *count_sql, const char *list_sql, const char *owner,
                  ah_row_json_fn to_json);

#endif
