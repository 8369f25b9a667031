/* See invoke_timing.h. */
#include "invoke_timing.h"
#include "core/util.h"

#include <stdio.h>
#include <string.h>

#define PHASE_MAX_US (3600LL * 1000000) /* no phase of a call lasts an hour (600 s cap) */

static const char *const runner_keys[5] = {"queue_us", "take_us", "start_us", "run_us",
                                           "collect_us"};

void ah_inv_timing_runner(ah_inv_timing *t, json_object *ans)
{
	json_object *o = NULL, *v = NULL;
	t->runner = false;
	if (!json_object_is_type(ans, json_type_object) ||
	    !json_object_object_get_ex(ans, "timing", &o) || !json_object_is_type(o, json_type_object))
		return;
	for (int i = 0; i < 5; i++) {
		if (!json_object_object_get_ex(o, runner_keys[i], &v) ||
		    !json_object_is_type(v, json_type_int))
			return;
		int64_t x = json_object_get_int64(v);
		if (x < 0 || x > PHASE_MAX_US)
			return;
		t->runner_us[i] = x;
	}
	t->runner = true;
}

static int64_t pos(int64_t x)
{
	return x > 0 ? x : 0;
}

/* The trip to the runner and back, less the runner's own phases (the
 * request's and answer's transfer and parsing), counts in queue. Without
 * the runner's phases the whole call counts as run. */
void ah_inv_timing_phases(ah_inv_timing *t, int64_t now)
{
	int64_t before = t->t_call ? pos(t->t_call - t->t_req) : pos(now - t->t_req);
	int64_t call = t->t_call && t->t_answer ? pos(t->t_answer - t->t_call) : 0;
	int64_t after = t->t_answer ? pos(now - t->t_answer) : 0;
	memset(t->us, 0, sizeof t->us);
	if (!t->runner) {
		t->us[AH_MX_PH_QUEUE] = before;
		t->us[AH_MX_PH_RUN] = call;
		t->us[AH_MX_PH_COLLECT] = after;
		return;
	}
	const int64_t *r = t->runner_us;
	int64_t wire = pos(call - (r[0] + r[1] + r[2] + r[3] + r[4]));
	t->us[AH_MX_PH_QUEUE] = before + r[0] + wire;
	t->us[AH_MX_PH_TAKE] = r[1];
	t->us[AH_MX_PH_START] = r[2];
	t->us[AH_MX_PH_RUN] = r[3];
	t->us[AH_MX_PH_COLLECT] = r[4] + after;
	t->us[AH_MX_PH_RECORD] = 0;
}

const char *ah_inv_timing_text(ah_req *r, const ah_inv_timing *t)
{
	char buf[256];
	size_t n = 0;
	for (int i = 0; i < AH_MX_PH_N && n < sizeof buf; i++)
		n += (size_t)snprintf(buf + n, sizeof buf - n, "%s\"%s_ms\":%.3f", i ? "," : "{",
		                      ah_mx_phase_names[i], (double)t->us[i] / 1000.0);
	return n < sizeof buf - 1 ? ah_sprintf(r->arena, "%s}", buf) : NULL;
}

void ah_inv_timing_header(ah_req *r, const ah_inv_timing *t)
{
	char buf[256];
	size_t n = 0;
	for (int i = 0; i < AH_MX_PH_N && n < sizeof buf; i++)
		n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s;dur=%.3f", i ? ", " : "",
		                      ah_mx_phase_names[i], (double)t->us[i] / 1000.0);
	if (n < sizeof buf)
		ah_header(r, "Server-Timing", buf);
	ah_mx_phases(t->us);
}
