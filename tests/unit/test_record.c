/* Unit test of lib/db/record.c and of the column tables built on it: each
 * table names exactly the columns its SELECT-list macro selects, in order (a
 * column added to one but not the other would shift every field after it),
 * and a row fills the struct as the API then shows it. Printed as TAP. */
#include "agents.h"
#include "auth/user.h"
#include "db/record.h"

#include <string.h>

#include "tap.h"

static void test_lists_agree(void)
{
	size_t n;
	const ah_col *c = ah_agent_columns(&n);
	ok(ah_record_cols_match(c, n, AH_AGENT_COLS), "agent table matches AH_AGENT_COLS");
	c = ah_user_columns(&n);
	ok(ah_record_cols_match(c, n, AH_USER_COLS), "user table matches AH_USER_COLS");
	ok(!ah_record_cols_match(c, n, "u.id, u.email, u.plan, u.quota_bytes, u.disabled"),
	   "a list one column short does not match");
	ok(!ah_record_cols_match(c, n, AH_USER_COLS ", u.extra"), "a list one column long does not match");
	ok(!ah_record_cols_match(c, n, "u.id, u.plan, u.email, u.quota_bytes, u.disabled, u.created_at"),
	   "a list in another order does not match");
	ok(!ah_record_cols_match(c, n, "u.idx, u.email, u.plan, u.quota_bytes, u.disabled, u.created_at"),
	   "a longer name does not match its prefix");
}

static void test_agent_fill(void)
{
	char *row[] = {"agt_1", "Name", "name", NULL, "local", NULL, NULL, "300", "active", NULL,
	               "sbx", "1", "2026-01-01 00:00:00.000", "2026-01-01 00:00:00.000", NULL,
	               "/img", "index.js", "r1", "abc", "3", "def", "1.500000", NULL,
	               "{\"mode\":\"allow\",\"allow\":[]}", "https://hooks.example.com/x"};
	ah_arena *ar = ah_arena_new();
	ah_rows rows = {.n = 1, .ncols = sizeof(row) / sizeof(row[0]), .v = (char **[]){row}};
	ah_req r = {.arena = ar};
	const ah_agent *a = ah_agent_from_rows(&r, &rows, 0);
	ok(strcmp(a->id, "agt_1") == 0 && strcmp(a->code_sha256, "abc") == 0, "first and late columns");
	ok(a->min_warm == 3, "min_warm 3");
	ok(a->image_sha256 && strcmp(a->image_sha256, "def") == 0, "image_sha256");
	ok(a->max_day && strcmp(a->max_day, "1.500000") == 0 && !a->max_month,
	   "budgets: a limit and none");
	ok(a->network && strncmp(a->network, "{\"mode\":", 8) == 0, "network");
	ok(a->webhook_url && strcmp(a->webhook_url, "https://hooks.example.com/x") == 0,
	   "webhook_url (the last column)");
	ok(a->description == NULL && a->deployed_at == NULL, "SQL NULL stays NULL");
	ok(a->source_type == AH_SOURCE_LOCAL, "source_type 'local'");
	ok(a->status == AH_AGENT_ACTIVE, "status 'active'");
	ok(a->timeout_seconds == 300, "timeout_seconds 300");
	ok(a->needs_redeploy, "needs_redeploy '1'");
	row[7] = NULL;
	row[8] = "retired"; /* a value the schema might gain before this code knows it */
	row[11] = "0";
	row[19] = NULL;
	a = ah_agent_from_rows(&r, &rows, 0);
	ok(a->min_warm == 0, "NULL min_warm is 0: no warm processes");
	ok(a->timeout_seconds == AH_AGENT_TIMEOUT_DEFAULT, "NULL timeout is the default");
	ok(a->status == AH_AGENT_ERROR, "an unknown status reads as 'error' (never invokable)");
	ok(!a->needs_redeploy, "needs_redeploy '0'");
	ah_arena_destroy(ar);
}

static void test_user_fill(void)
{
	char *row[] = {"usr_1", "a@b", "pro", "1048576", "1", "2026-01-01 00:00:00.000"};
	ah_arena *ar = ah_arena_new();
	ah_user *u = ah_user_from_row(ar, row);
	ok(strcmp(u->id, "usr_1") == 0 && strcmp(u->email, "a@b") == 0 && strcmp(u->plan, "pro") == 0,
	   "user strings");
	ok(u->quota_bytes == 1048576 && u->disabled, "user quota and disabled");
	ah_arena_destroy(ar);
}

int main(void)
{
	test_lists_agree();
	test_agent_fill();
	test_user_fill();
	ok(ah_enum_find(ah_agent_status_names, "stopped") == AH_AGENT_STOPPED, "enum name table order");
	ok(ah_enum_find(ah_agent_status_names, NULL) == -1, "NULL names no value");
	return tap_done();
}
