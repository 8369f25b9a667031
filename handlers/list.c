/* See list.h. */
#include "list.h"
#include "core/util.h"

int ah_list_reply(ah_req *r, const char *count_sql, const char *list_sql, const char *owner,
                  ah_row_json_fn to_json)
{
	long long limit, offset, total = 0;
	ah_rows rows, count;
	if (ah_page(r, &limit, &offset) != 0)
		return AH_EDONE;
	if (ah_db_query(r->db, r->arena, &count, count_sql, "s", owner) != 0 ||
	    ah_db_query(r->db, r->arena, &rows, list_sql, "sii", owner, limit, offset) != 0)
		return AH_EFAIL;
	json_object *arr = json_object_new_array();
	for (size_t i = 0; i < rows.n; i++)
		json_object_array_add(arr, to_json(r, &rows, i));
	ah_parse_ll(&total, ah_cell(&count, 0, 0));
	return ah_reply_list(r, arr, total);
}
