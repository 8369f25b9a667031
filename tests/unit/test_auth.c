/* Unit test of lib/auth: the API-key shape check, and every Authorization header
 * that must be refused before the database is asked (the request here has no
 * database at all, so reaching it would crash the test). TAP. */
#include "auth/auth.h"

#include <fcgiapp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tap.h"

static const struct {
	const char *desc, *key;
	int valid;
} shape_cases[] = {
	{"well-formed", "ahk_AbCd1234_0123456789", 1},
	{"all digits", "ahk_00000000_0000000000", 1},
	{"all letters", "ahk_zzzzzzzz_ZZZZZZZZZZ", 1},
	{"empty", "", 0},
	{"prefix only", "ahk_", 0},
	{"id too short", "ahk_AbCd123_0123456789", 0},
	{"id too long", "ahk_AbCd12345_0123456789", 0},
	{"secret too short", "ahk_AbCd1234_012345678", 0},
	{"secret too long", "ahk_AbCd1234_01234567890", 0},
	{"upper-case prefix", "AHK_AbCd1234_0123456789", 0},
	{"other prefix", "ahx_AbCd1234_0123456789", 0},
	{"dash separator", "ahk_AbCd1234-0123456789", 0},
	{"no separator", "ahk_AbCd12340123456789X", 0},
	{"underscore in id", "ahk_AbCd_234_0123456789", 0},
	{"punctuation in secret", "ahk_AbCd1234_012345678!", 0},
	{"space in secret", "ahk_AbCd1234_01234 6789", 0},
	{"non-ASCII in secret", "ahk_AbCd1234_01234567\xc3\xa9", 0},
	{"trailing newline", "ahk_AbCd1234_012345678\n", 0},
	{"JWT", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", 0},
};

static void test_shape(void)
{
	for (size_t i = 0; i < sizeof(shape_cases) / sizeof(shape_cases[0]); i++)
		ok(ah_auth_key_shape_ok(shape_cases[i].key) == (shape_cases[i].valid != 0),
		   "key shape: %s is %s", shape_cases[i].desc, shape_cases[i].valid ? "accepted" : "refused");
}

/* Headers refused without a database lookup; NULL: no Authorization header. */
static const struct {
	const char *desc, *header;
} refused_cases[] = {
	{"no header", NULL},
	{"empty header", ""},
	{"Bearer alone", "Bearer"},
	{"Bearer and a space", "Bearer "},
	{"Bearer and spaces", "Bearer    "},
	{"Basic credentials", "Basic dXNlcjpwYXNz"},
	{"Token scheme", "Token ahk_AbCd1234_0123456789"},
	{"key without a scheme", "ahk_AbCd1234_0123456789"},
	{"Bearer without space", "Bearerahk_AbCd1234_0123456789"},
	{"short key", "Bearer ahk_abc"},
	{"long key", "Bearer ahk_AbCd1234_0123456789x"},
	{"two keys", "Bearer ahk_AbCd1234_0123456789 ahk_AbCd1234_0123456789"},
	{"wrong separator", "Bearer ahk_AbCd1234-0123456789"},
	{"JWT", "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0."},
};

static void test_refused(void)
{
	for (size_t i = 0; i < sizeof(refused_cases) / sizeof(refused_cases[0]); i++) {
		ah_arena *a = ah_arena_new();
		FCGX_Request fcgi = {0};
		char *env[2] = {NULL, NULL};
		if (refused_cases[i].header)
			env[0] = ah_sprintf(a, "HTTP_AUTHORIZATION=%s", refused_cases[i].header);
		fcgi.envp = env;
		ah_req r = {.arena = a, .fcgi = &fcgi, .db = NULL};
		const char *why = NULL;
		int rc = ah_auth_request(&r, &why);
		ok(rc == AH_EDENIED && why && *why && r.user == NULL, "refused before the database: %s (%s)",
		   refused_cases[i].desc, why ? why : "-");
		ah_arena_destroy(a);
	}
}

int main(void)
{
	test_shape();
	test_refused();
	printf("1..%d\n", ntest);
	return nfail != 0;
}
