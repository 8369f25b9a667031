/* An invocation's phases (issue 31): where the milliseconds of a call go.
 * queue (the API's checks, the trip to the runner and a wait for one of its
 * slots), take (a sandbox leased: a warm process, a spare or a new one; the
 * model gateway and the call's files placed), start (the program started, or
 * a warm one handed its prompt), run (the program's own time, its start-up
 * included), collect (its output and files read and checked) and record
 * (tokens counted, priced, the history written). Sent as a Server-Timing
 * header, kept in the history as "timing" and counted in the metrics. */
#ifndef AH_HANDLERS_INVOKE_TIMING_H
#define AH_HANDLERS_INVOKE_TIMING_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/metrics.h"
#include "http/http.h"

typedef struct ah_inv_timing {
	/* Marks (ah_mono_us): the request in, the runner called, its answer
	 * in, the outcome known (recording starts). */
	int64_t t_req, t_call, t_answer, t_ran;
	/* The runner's own phases (its answer's "timing"): queue, take, start,
	 * run, collect; runner false when the answer had none. */
	int64_t runner_us[5];
	bool runner;
	int64_t us[AH_MX_PH_N]; /* the phases, by ah_inv_timing_phases */
} ah_inv_timing;

/* The runner's "timing" object out of its answer (any JSON: what a runner
 * sends is input). Values that are not non-negative integers under an hour
 * leave runner false. */
void ah_inv_timing_runner(ah_inv_timing *t, json_object *ans);

/* The phases up to now (recording's start); record is now - t_ran. */
void ah_inv_timing_phases(ah_inv_timing *t, int64_t now);

/* {"queue_ms": 0.412, ...}: the record's "timing" column (the record phase
 * up to the history's write; the header's includes the write). */
const char *ah_inv_timing_text(ah_req *r, const ah_inv_timing *t);

/* The Server-Timing header of the answer, and the metrics' histograms. */
void ah_inv_timing_header(ah_req *r, const ah_inv_timing *t);

#endif
