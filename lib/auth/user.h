/* The user record, as every user lookup (API key, JWT identity) selects it. */
#ifndef AH_AUTH_USER_H
#define AH_AUTH_USER_H

#include "http/http.h"

/* The SELECT list of a user from `users u`; the columns of user.c's table, in
 * order (tests/unit/test_record.c checks). */
#define AH_USER_COLS "u.id, u.email, u.plan, u.quota_bytes, u.disabled, u.created_at"

/* The user of the AH_USER_COLS cells starting at v, parsed into arena a. */
ah_user *ah_user_from_row(ah_arena *a, char *const *v);

/* The column table behind AH_USER_COLS (for the unit test). */
struct ah_col;
const struct ah_col *ah_user_columns(size_t *n);

#endif
