/* Unit test of lib/rpc/codes.c, the error codes a runner's answer carries,
 * and of the API's one table of them (handlers/invoke_answer.c): each code's
 * name on the wire, what a status becomes, and what a call answers for each
 * code, also for a runner from before codes (a rolling upgrade). */
#include "rpc/rpc.h"
#include "invoke_answer.h"
#include "core/util.h"

#include <string.h>

#include "tap.h"

static void test_names(void)
{
	static const char *const want[AH_RPC_CODE_COUNT] = {
		"ok", "failed", "busy", "mount_failed", "invalid", "wrong_runner", "overloaded",
	};
	for (int c = 0; c < AH_RPC_CODE_COUNT; c++) {
		ok(strcmp(ah_rpc_code_name((ah_rpc_code)c), want[c]) == 0, "name: %d is %s", c, want[c]);
		ok(ah_rpc_code_parse(want[c], false) == (ah_rpc_code)c, "parse: %s round trips", want[c]);
	}
	ok(strcmp(ah_rpc_code_name(AH_RPC_CODE_COUNT), "failed") == 0 &&
	   strcmp(ah_rpc_code_name((ah_rpc_code)-1), "failed") == 0, "name: out of range is failed");
	ok(ah_rpc_code_parse("no_such_code", false) == AH_RPC_FAILED &&
	   ah_rpc_code_parse("", true) == AH_RPC_FAILED, "parse: an unknown name is failed");
	ok(ah_rpc_code_parse(NULL, true) == AH_RPC_OK && ah_rpc_code_parse(NULL, false) == AH_RPC_FAILED,
	   "parse: no code is ok or failed as the answer's ok says");
}

static void test_statuses(void)
{
	ok(ah_rpc_code_of(AH_OK) == AH_RPC_OK, "status: 0 is ok");
	ok(ah_rpc_code_of(AH_EBUSY) == AH_RPC_BUSY, "status: AH_EBUSY is busy");
	ok(ah_rpc_code_of(AH_EMOUNT) == AH_RPC_MOUNT, "status: AH_EMOUNT is mount_failed");
	ok(ah_rpc_code_of(AH_EINVALID) == AH_RPC_INVALID, "status: AH_EINVALID is invalid");
	ok(ah_rpc_code_of(AH_EFAIL) == AH_RPC_FAILED && ah_rpc_code_of(AH_ENOTFOUND) == AH_RPC_FAILED &&
	   ah_rpc_code_of(AH_ETIMEOUT) == AH_RPC_FAILED, "status: the others are failed");
}

/* The HTTP status and error of a call whose runner answered text. */
static int call(ah_arena *a, const char *text, const char **error, long long *retry)
{
	ah_req r = {.arena = a};
	ah_run_out o = {0};
	json_object *ans = json_tokener_parse(text);
	ah_run_answer(&r, ans, 30, 1024, &o);
	*error = o.error ? ah_sprintf(a, "%s", o.error) : NULL; /* o.error may point into ans */
	json_object_put(ans);
	*retry = o.retry_after;
	return o.http;
}

static void test_http(void)
{
	static const int want[AH_RPC_CODE_COUNT] = {200, 500, 503, 500, 500, 500, 503};
	for (int c = 0; c < AH_RPC_CODE_COUNT; c++)
		ok(ah_run_code_http(c) == want[c], "http: %s is %d", ah_rpc_code_name((ah_rpc_code)c), want[c]);
	ok(ah_run_code_http(-1) == 500 && ah_run_code_http(AH_RPC_CODE_COUNT) == 500,
	   "http: out of range is 500");

	ah_arena *a = ah_arena_new();
	const char *e;
	long long retry;
	int h = call(a, "{\"ok\":false,\"code\":\"busy\",\"error\":\"at budget\",\"retry_after\":5}", &e, &retry);
	ok(h == 503 && retry == 5 && strcmp(e, "at budget") == 0, "answer: busy is 503 with Retry-After");
	h = call(a, "{\"ok\":false,\"error\":\"at budget\",\"busy\":true,\"retry_after\":7}", &e, &retry);
	ok(h == 503 && retry == 7, "answer: an older runner's busy:true (no code) is 503 too");
	h = call(a, "{\"ok\":false,\"code\":\"overloaded\",\"error\":\"runner overloaded\",\"busy\":true,"
	         "\"retry_after\":5}", &e, &retry);
	ok(h == 503 && retry == 5 && strcmp(e, "runner overloaded") == 0,
	   "answer: overloaded (no connection thread free: nothing ran) is 503 with Retry-After");
	/* The code decides, not the boolean, nor the text. */
	h = call(a, "{\"ok\":false,\"code\":\"failed\",\"error\":\"x\",\"busy\":true}", &e, &retry);
	ok(h == 500, "answer: code failed with a stray busy:true is 500");
	h = call(a, "{\"ok\":false,\"code\":\"mount_failed\",\"error\":\"Bucket mount at /data (bucket 'b') "
	         "is not mounted\"}", &e, &retry);
	ok(h == 500 && strcmp(e, "sandbox runner error: Bucket mount at /data (bucket 'b') is not mounted") == 0,
	   "answer: mount_failed is 500 with the runner's message");
	h = call(a, "{\"ok\":false,\"code\":\"a_code_from_later\",\"error\":\"new\"}", &e, &retry);
	ok(h == 500 && strcmp(e, "sandbox runner error: new") == 0, "answer: an unknown code is failed");
	h = call(a, "{\"ok\":false,\"code\":7,\"error\":\"odd\"}", &e, &retry);
	ok(h == 500, "answer: a code that is not a string is failed");
	ah_arena_destroy(a);
}

int main(void)
{
	test_names();
	test_statuses();
	test_http();
	return tap_done();
}
