/* The user record: its column table. Shared by auth.c (API keys) and
 * jwt_login.c (JWT identities), neither of which needs the other for it. */
#include "auth/user.h"
#include "db/record.h"

static const ah_col USER_COLUMNS[] = {
	AH_COL_S("u.id", ah_user, id),
	AH_COL_S("u.email", ah_user, email),
	AH_COL_S("u.plan", ah_user, plan),
	AH_COL_I("u.quota_bytes", ah_user, quota_bytes, 0),
	AH_COL_B("u.disabled", ah_user, disabled),
	AH_COL_S("u.created_at", ah_user, created_at),
};
#define USER_NCOLS (sizeof(USER_COLUMNS) / sizeof(USER_COLUMNS[0]))

const ah_col *ah_user_columns(size_t *n)
{
	*n = USER_NCOLS;
	return USER_COLUMNS;
}

ah_user *ah_user_from_row(ah_arena *a, char *const *v)
{
	ah_user *u = ah_alloc(a, sizeof(*u));
	ah_record_fill(u, USER_COLUMNS, USER_NCOLS, v);
	return u;
}
