/* Fuzz target: the API reading a runner's answer to a run (handlers/
 * invoke_answer.c), as a worker does once the wire has delivered it (the wire
 * itself: fuzz_wire). Input: the answer's JSON text. Property: whatever the
 * runner sends, the outcome is 200, 500, 503 or 504; a failure has an error
 * and a detail; a 503's Retry-After is 1..600 s; the decoded stdout is no
 * longer than its base64 allows; the phases read from its "timing" are
 * none negative, and fit in the call however it lies. */
#include "fake_req.h"
#include "invoke_answer.h"
#include "invoke_timing.h"

#include <json-c/json.h>

static size_t b64_len(json_object *ans)
{
	json_object *v = NULL;
	if (!json_object_is_type(ans, json_type_object) ||
	    !json_object_object_get_ex(ans, "stdout_b64", &v))
		return 0;
	const char *s = json_object_get_string(v);
	return s ? strlen(s) : 0;
}

static void check(const ah_run_out *o, json_object *ans)
{
	if (o->http != 200 && o->http != 500 && o->http != 503 && o->http != 504)
		__builtin_trap();
	if (o->http != 200 && (!o->error || !o->detail))
		__builtin_trap();
	if (o->http == 503 && (o->retry_after < 1 || o->retry_after > 600))
		__builtin_trap();
	if (o->out && o->out_len > b64_len(ans) / 4 * 3 + 3)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_tokener *tok = json_tokener_new();
	json_object *ans = json_tokener_parse_ex(tok, (const char *)data, (int)(size > 1 << 20 ? 1 << 20 : size));
	json_tokener_free(tok);
	if (!ans)
		return 0; /* unreadable: the worker answers "sandbox runner unavailable" */
	static struct fake_req f;
	fake_req_init(&f, "", "", 0);
	ah_run_out o = { 0 };
	ah_run_answer(&f.r, ans, 30, 1 << 20, &o);
	check(&o, ans);
	ah_inv_timing t = {.t_req = 1000, .t_call = 2000, .t_answer = 3000};
	ah_inv_timing_runner(&t, ans);
	ah_inv_timing_phases(&t, 4000);
	for (int i = 0; i < AH_MX_PH_N; i++)
		if (t.us[i] < 0 || (!t.runner && t.us[i] > 3000))
			__builtin_trap();
	json_object_put(ans);
	fake_req_done(&f);
	return 0;
}
