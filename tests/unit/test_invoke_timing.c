/* Unit test of an invocation's phases (handlers/invoke_timing.h), printed as
 * TAP: the runner's "timing" read as the input it is (what a runner sends is
 * never trusted), and the phases made of it and the API's marks: the trip to
 * the runner counts in queue, a runner that claims more than the call took
 * leaves no phase negative, and without the runner's part the call is run. */
#include "invoke_timing.h"

#include <json-c/json.h>
#include <string.h>

#include "tap.h"

static const struct {
	const char *answer;
	bool runner;
	const char *what;
} answers[] = {
	{"{\"timing\":{\"queue_us\":1,\"take_us\":2,\"start_us\":3,\"run_us\":4,\"collect_us\":5}}", true,
	 "all five"},
	{"{\"timing\":{\"queue_us\":1,\"take_us\":2,\"start_us\":3,\"run_us\":4}}", false, "one missing"},
	{"{\"timing\":{\"queue_us\":-1,\"take_us\":2,\"start_us\":3,\"run_us\":4,\"collect_us\":5}}", false,
	 "a negative one"},
	{"{\"timing\":{\"queue_us\":\"1\",\"take_us\":2,\"start_us\":3,\"run_us\":4,\"collect_us\":5}}", false,
	 "a string"},
	{"{\"timing\":{\"queue_us\":1.5,\"take_us\":2,\"start_us\":3,\"run_us\":4,\"collect_us\":5}}", false,
	 "a fraction"},
	{"{\"timing\":{\"queue_us\":1,\"take_us\":2,\"start_us\":3,\"run_us\":3600000001,\"collect_us\":5}}",
	 false, "over an hour"},
	{"{\"timing\":[1,2,3,4,5]}", false, "an array"},
	{"{}", false, "none"},
	{"[]", false, "not an object"},
};

int main(void)
{
	for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++) {
		json_object *a = json_tokener_parse(answers[i].answer);
		ah_inv_timing t = {.runner = true};
		ah_inv_timing_runner(&t, a);
		ok(t.runner == answers[i].runner, "runner timing: %s", answers[i].what);
		json_object_put(a);
	}
	/* Request at 0, runner called at 1000 µs, answer at 11000, now 11500:
	 * the runner's phases sum to 9000, so 1000 was the trip. */
	ah_inv_timing t = {.t_req = 0, .t_call = 1000, .t_answer = 11000, .runner = true,
	                   .runner_us = {100, 200, 300, 8000, 400}};
	ah_inv_timing_phases(&t, 11500);
	ok(t.us[AH_MX_PH_QUEUE] == 1000 + 100 + 1000, "queue: before the call, the runner's queue and the trip");
	ok(t.us[AH_MX_PH_TAKE] == 200 && t.us[AH_MX_PH_START] == 300 && t.us[AH_MX_PH_RUN] == 8000,
	   "take, start and run: the runner's");
	ok(t.us[AH_MX_PH_COLLECT] == 400 + 500, "collect: the runner's and the API's after the answer");
	int64_t sum = 0;
	for (int i = 0; i < AH_MX_PH_N; i++)
		sum += t.us[i];
	ok(sum == 11500, "the phases add up to the call (%lld)", (long long)sum);
	/* A runner whose phases exceed the call: no negative trip. */
	t = (ah_inv_timing){.t_req = 0, .t_call = 1000, .t_answer = 2000, .runner = true,
	                    .runner_us = {100, 200, 300, 8000, 400}};
	ah_inv_timing_phases(&t, 2000);
	bool none_negative = true;
	for (int i = 0; i < AH_MX_PH_N; i++)
		none_negative = none_negative && t.us[i] >= 0;
	ok(none_negative && t.us[AH_MX_PH_QUEUE] == 1100, "an overclaiming runner: no negative phase");
	/* No runner part (a timeout, an old runner): the call is the run. */
	t = (ah_inv_timing){.t_req = 0, .t_call = 1000, .t_answer = 9000};
	ah_inv_timing_phases(&t, 9300);
	ok(t.us[AH_MX_PH_QUEUE] == 1000 && t.us[AH_MX_PH_RUN] == 8000 && t.us[AH_MX_PH_COLLECT] == 300 &&
	   t.us[AH_MX_PH_TAKE] == 0 && t.us[AH_MX_PH_START] == 0, "without the runner's part: the call is run");
	/* Refused before the runner was called (t_call 0): all of it is queue. */
	t = (ah_inv_timing){.t_req = 100};
	ah_inv_timing_phases(&t, 600);
	ok(t.us[AH_MX_PH_QUEUE] == 500 && t.us[AH_MX_PH_RUN] == 0, "never called: queue only");
	return tap_done();
}
