/* The process's counters for the Prometheus exposition (docs/metrics.md):
 * requests by route and status with latency histograms, invocations by status
 * with duration histograms, tokens and cost, database errors and retries.
 *
 * A process counts into one slot. The API's master maps a shared array of
 * slots before it forks (ah_mx_shared_init), each worker takes its own
 * (ah_mx_use), and a scrape, answered by any worker, sums all that were ever
 * taken (not every one mapped: a scrape costs what the workers do): no lock
 * on the hot path, and a respawned worker keeps counting where the dead one
 * stopped, so the counters never go backwards. Other programs (the runner)
 * count into a slot of their own. Increments are relaxed atomics: the
 * runner's threads share its slot, and a scrape must never read a torn
 * value. */
#ifndef AH_CORE_METRICS_H
#define AH_CORE_METRICS_H

#include <stdint.h>
#include <stdio.h>

#define AH_MX_ROUTES 128   /* route rows counted apart; the rest share the last */
#define AH_MX_BUCKETS 14   /* histogram bounds, +Inf not included */

/* Index 0 is "any other status". */
#define AH_MX_CODES 28

typedef struct ah_mx_hist {
	uint64_t bucket[AH_MX_BUCKETS + 1]; /* per bound, not cumulative; last: +Inf */
	uint64_t sum_us;
} ah_mx_hist;

enum { AH_MX_INV_COMPLETED, AH_MX_INV_FAILED, AH_MX_INV_N };
enum { AH_MX_TOK_INPUT, AH_MX_TOK_OUTPUT, AH_MX_TOK_N };
enum { AH_MX_RETRY_LOST, AH_MX_RETRY_DEADLOCK, AH_MX_RETRY_N };
/* An invocation's phases (issue 31), in the order of its Server-Timing. */
enum { AH_MX_PH_QUEUE, AH_MX_PH_TAKE, AH_MX_PH_START, AH_MX_PH_RUN, AH_MX_PH_COLLECT,
       AH_MX_PH_RECORD, AH_MX_PH_N };
extern const char *const ah_mx_phase_names[AH_MX_PH_N];

typedef struct ah_mx_slot {
	/* Bit r: route r was counted. A worker answers a handful of the routes:
	 * a scrape sums their rows alone, not every row of every slot. */
	uint64_t route_seen[AH_MX_ROUTES / 64];
	uint64_t requests[AH_MX_ROUTES][AH_MX_CODES];
	ah_mx_hist request_time[AH_MX_ROUTES];
	/* From here on, summed whole. */
	uint64_t invocations[AH_MX_INV_N];
	ah_mx_hist invocation_time;
	ah_mx_hist phase_time[AH_MX_PH_N];
	uint64_t tokens[AH_MX_TOK_N];
	uint64_t cost_pico;        /* USD × 1e12, as core/money.h */
	uint64_t db_errors;
	uint64_t db_retries[AH_MX_RETRY_N];
} ah_mx_slot;

/* Before forking: n shared slots. 0, or AH_EFAIL (the process keeps its own). */
int ah_mx_shared_init(unsigned n);
/* In a forked child: count into shared slot i (out of range: no change). */
void ah_mx_use(unsigned i);

/* Counting (each a few relaxed atomic adds). route is an index below
 * AH_MX_ROUTES (larger ones share the last). */
void ah_mx_request(unsigned route, int status, int64_t elapsed_us);
void ah_mx_invocation(int status, int64_t elapsed_ms, long long in_tok, long long out_tok,
                      const char *cost);
/* One invocation's phases, us[AH_MX_PH_N] in microseconds. */
void ah_mx_phases(const int64_t *us);
void ah_mx_db_error(void);
void ah_mx_db_retry(int kind);

/* The label of a route index for ah_mx_write_requests: *method and *pattern. */
typedef void (*ah_mx_route_fn)(unsigned route, const char **method, const char **pattern);

/* Every slot summed, into a buffer of the caller's process (not reentrant). */
const ah_mx_slot *ah_mx_total(void);
/* The exposition of the sum, in the Prometheus text format. The request
 * families need the route names (the API's); the others stand alone. */
void ah_mx_write_requests(FILE *f, const ah_mx_slot *t, ah_mx_route_fn names);
void ah_mx_write_invocations(FILE *f, const ah_mx_slot *t);
void ah_mx_write_db(FILE *f, const ah_mx_slot *t);

/* Helpers for other families: "# HELP"/"# TYPE" lines, and a histogram of
 * one series (labels: "" or `name="value"`). */
void ah_mx_family(FILE *f, const char *name, const char *type, const char *help);
void ah_mx_write_hist(FILE *f, const char *name, const char *labels, const ah_mx_hist *h,
                      const double *bounds);

#endif
