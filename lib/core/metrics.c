/* See metrics.h. */
#include "core/metrics.h"
#include "core/err.h"

#include <ctype.h>
#include <stddef.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>

static ah_mx_slot local;
static ah_mx_slot *shared;
static unsigned nshared;
/* One past the highest slot any process took (in the shared mapping, ahead of
 * the slots): a scrape sums those alone. The master maps a slot for every
 * worker it might ever run (515), some 23 MB, and summing them all made every
 * scrape cost milliseconds; the slots past this were never counted into. */
static unsigned *shared_used;
static ah_mx_slot *cur = &local;

/* Seconds. Requests: a millisecond to a minute; invocations: up to their 600 s cap. */
static const double http_bounds[AH_MX_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                  0.25, 0.5, 1, 2.5, 5, 10, 60};
static const double inv_bounds[AH_MX_BUCKETS] = {0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60,
                                                 120, 300, 600};
/* An invocation's phases: 50 µs to a minute (a run is up to 600 s: +Inf). */
static const double phase_bounds[AH_MX_BUCKETS] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001,
                                                   0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5,
                                                   10, 60};
const char *const ah_mx_phase_names[AH_MX_PH_N] = {"queue", "take", "start", "run", "collect",
                                                   "record"};

/* The statuses counted apart (index 0: any other). */
static const int codes[AH_MX_CODES] = {0, 200, 201, 202, 204, 206, 301, 302, 304, 400, 401, 403,
                                       404, 405, 408, 409, 410, 411, 413, 415, 416, 422, 429,
                                       500, 501, 502, 503, 504};

/* The slots start a cache line in, after the count of slots taken. */
#define MX_HEAD 64

int ah_mx_shared_init(unsigned n)
{
	void *p = mmap(NULL, MX_HEAD + (size_t)n * sizeof(ah_mx_slot), PROT_READ | PROT_WRITE,
	               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (n == 0 || p == MAP_FAILED)
		return AH_EFAIL;
	shared_used = p;
	shared = (ah_mx_slot *)((char *)p + MX_HEAD);
	nshared = n;
	return 0;
}

void ah_mx_use(unsigned i)
{
	if (!shared || i >= nshared)
		return;
	cur = &shared[i];
	unsigned seen = __atomic_load_n(shared_used, __ATOMIC_RELAXED);
	while (seen < i + 1 && !__atomic_compare_exchange_n(shared_used, &seen, i + 1, true,
	                                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static void add(uint64_t *x, uint64_t n)
{
	__atomic_fetch_add(x, n, __ATOMIC_RELAXED);
}

static unsigned code_index(int status)
{
	for (unsigned i = 1; i < AH_MX_CODES; i++)
		if (codes[i] == status)
			return i;
	return 0;
}

static void observe(ah_mx_hist *h, const double *bounds, int64_t us)
{
	if (us < 0)
		us = 0;
	unsigned b = 0;
	while (b < AH_MX_BUCKETS && (double)us > bounds[b] * 1e6)
		b++;
	add(&h->bucket[b], 1);
	add(&h->sum_us, (uint64_t)us);
}

void ah_mx_request(unsigned route, int status, int64_t elapsed_us)
{
	if (route >= AH_MX_ROUTES)
		route = AH_MX_ROUTES - 1;
	uint64_t bit = 1ull << (route % 64);
	if (!(__atomic_load_n(&cur->route_seen[route / 64], __ATOMIC_RELAXED) & bit))
		__atomic_fetch_or(&cur->route_seen[route / 64], bit, __ATOMIC_RELAXED);
	add(&cur->requests[route][code_index(status)], 1);
	observe(&cur->request_time[route], http_bounds, elapsed_us);
}

/* Decimal USD text ("0.000117", "0.000117000000") in pico-dollars; 0 if it is not one. */
static uint64_t pico_of(const char *s)
{
	uint64_t whole = 0, frac = 0;
	int digits = 0;
	for (; s && isdigit((unsigned char)*s); s++)
		whole = whole * 10 + (uint64_t)(*s - '0');
	if (s && *s == '.')
		for (s++; isdigit((unsigned char)*s) && digits < 12; s++, digits++)
			frac = frac * 10 + (uint64_t)(*s - '0');
	for (; digits < 12; digits++)
		frac *= 10;
	return whole * 1000000000000ULL + frac;
}

void ah_mx_invocation(int status, int64_t elapsed_ms, long long in_tok, long long out_tok,
                      const char *cost)
{
	add(&cur->invocations[status == AH_MX_INV_COMPLETED ? 0 : 1], 1);
	observe(&cur->invocation_time, inv_bounds, elapsed_ms * 1000);
	add(&cur->tokens[AH_MX_TOK_INPUT], in_tok > 0 ? (uint64_t)in_tok : 0);
	add(&cur->tokens[AH_MX_TOK_OUTPUT], out_tok > 0 ? (uint64_t)out_tok : 0);
	add(&cur->cost_pico, pico_of(cost));
}

void ah_mx_phases(const int64_t *us)
{
	for (unsigned i = 0; i < AH_MX_PH_N; i++)
		observe(&cur->phase_time[i], phase_bounds, us[i]);
}

void ah_mx_db_error(void)
{
	add(&cur->db_errors, 1);
}

void ah_mx_db_retry(int kind)
{
	add(&cur->db_retries[kind == AH_MX_RETRY_DEADLOCK], 1);
}

/* The struct is nothing but uint64_t counters: summed as arrays of them. */
static void add_words(void *out, const void *in, size_t bytes)
{
	uint64_t *o = out;
	const uint64_t *i = in;
	for (size_t k = 0; k < bytes / sizeof(uint64_t); k++)
		o[k] += __atomic_load_n(&i[k], __ATOMIC_RELAXED);
}

/* Adds one slot into sum: the rows of the routes it counted, and the rest. */
static void add_slot(ah_mx_slot *sum, const ah_mx_slot *in)
{
	for (unsigned w = 0; w < AH_MX_ROUTES / 64; w++) {
		uint64_t seen = __atomic_load_n(&in->route_seen[w], __ATOMIC_RELAXED);
		sum->route_seen[w] |= seen;
		for (; seen; seen &= seen - 1) {
			unsigned r = w * 64 + (unsigned)__builtin_ctzll(seen);
			add_words(sum->requests[r], in->requests[r], sizeof(sum->requests[r]));
			add_words(&sum->request_time[r], &in->request_time[r], sizeof(sum->request_time[r]));
		}
	}
	const size_t tail = offsetof(ah_mx_slot, invocations);
	add_words((char *)sum + tail, (const char *)in + tail, sizeof(*sum) - tail);
}

const ah_mx_slot *ah_mx_total(void)
{
	static ah_mx_slot sum;
	memset(&sum, 0, sizeof(sum));
	unsigned slots = shared ? __atomic_load_n(shared_used, __ATOMIC_RELAXED) : 1;
	for (unsigned s = 0; s < slots; s++)
		add_slot(&sum, shared ? &shared[s] : &local);
	return &sum;
}

void ah_mx_family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void ah_mx_write_hist(FILE *f, const char *name, const char *labels, const ah_mx_hist *h,
                      const double *bounds)
{
	const char *sep = *labels ? "," : "";
	uint64_t acc = 0;
	for (unsigned b = 0; b < AH_MX_BUCKETS; b++) {
		acc += h->bucket[b];
		fprintf(f, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, bounds[b],
		        (unsigned long long)acc);
	}
	acc += h->bucket[AH_MX_BUCKETS];
	fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, (unsigned long long)acc);
	fprintf(f, "%s_sum{%s} %.6f\n", name, labels, (double)h->sum_us / 1e6);
	fprintf(f, "%s_count{%s} %llu\n", name, labels, (unsigned long long)acc);
}

static uint64_t hist_count(const ah_mx_hist *h)
{
	uint64_t n = 0;
	for (unsigned b = 0; b <= AH_MX_BUCKETS; b++)
		n += h->bucket[b];
	return n;
}

void ah_mx_write_requests(FILE *f, const ah_mx_slot *t, ah_mx_route_fn names)
{
	const char *m, *p;
	char labels[512];
	/* Only the series seen: most routes never answer most statuses. */
	ah_mx_family(f, "agenthost_http_requests_total", "counter",
	             "API requests answered, by route pattern, method and status.");
	for (unsigned r = 0; r < AH_MX_ROUTES; r++)
		for (unsigned c = 0; c < AH_MX_CODES; c++) {
			if (!t->requests[r][c])
				continue;
			names(r, &m, &p);
			char code[8];
			snprintf(code, sizeof(code), "%d", codes[c]);
			fprintf(f, "agenthost_http_requests_total{route=\"%s\",method=\"%s\",code=\"%s\"} %llu\n",
			        p, m, c ? code : "other", (unsigned long long)t->requests[r][c]);
		}
	ah_mx_family(f, "agenthost_http_request_duration_seconds", "histogram",
	             "Time from a request's arrival at a worker to its answer, by route pattern and method.");
	for (unsigned r = 0; r < AH_MX_ROUTES; r++) {
		if (!hist_count(&t->request_time[r]))
			continue;
		names(r, &m, &p);
		snprintf(labels, sizeof(labels), "route=\"%s\",method=\"%s\"", p, m);
		ah_mx_write_hist(f, "agenthost_http_request_duration_seconds", labels,
		                 &t->request_time[r], http_bounds);
	}
}

void ah_mx_write_invocations(FILE *f, const ah_mx_slot *t)
{
	ah_mx_family(f, "agenthost_invocations_total", "counter",
	             "Invocations recorded in the history, by status.");
	fprintf(f, "agenthost_invocations_total{status=\"completed\"} %llu\n",
	        (unsigned long long)t->invocations[AH_MX_INV_COMPLETED]);
	fprintf(f, "agenthost_invocations_total{status=\"failed\"} %llu\n",
	        (unsigned long long)t->invocations[AH_MX_INV_FAILED]);
	ah_mx_family(f, "agenthost_invocation_duration_seconds", "histogram",
	             "Duration of recorded invocations (the history's duration_ms).");
	ah_mx_write_hist(f, "agenthost_invocation_duration_seconds", "", &t->invocation_time,
	                 inv_bounds);
	ah_mx_family(f, "agenthost_invocation_phase_seconds", "histogram",
	             "Each phase of an invocation (its Server-Timing): queue, take, start, run,"
	             " collect, record.");
	for (unsigned i = 0; i < AH_MX_PH_N; i++) {
		char labels[32];
		snprintf(labels, sizeof labels, "phase=\"%s\"", ah_mx_phase_names[i]);
		ah_mx_write_hist(f, "agenthost_invocation_phase_seconds", labels, &t->phase_time[i],
		                 phase_bounds);
	}
	ah_mx_family(f, "agenthost_invocation_tokens_total", "counter",
	             "Tokens of recorded invocations, by kind (as billed: input, output).");
	fprintf(f, "agenthost_invocation_tokens_total{kind=\"input\"} %llu\n",
	        (unsigned long long)t->tokens[AH_MX_TOK_INPUT]);
	fprintf(f, "agenthost_invocation_tokens_total{kind=\"output\"} %llu\n",
	        (unsigned long long)t->tokens[AH_MX_TOK_OUTPUT]);
	ah_mx_family(f, "agenthost_invocation_cost_usd_total", "counter",
	             "Cost in USD of recorded invocations (the history's total_cost_usd).");
	fprintf(f, "agenthost_invocation_cost_usd_total %.12f\n", (double)t->cost_pico / 1e12);
}

void ah_mx_write_db(FILE *f, const ah_mx_slot *t)
{
	ah_mx_family(f, "agenthost_db_errors_total", "counter",
	             "Database statements that failed for good (after any retries).");
	fprintf(f, "agenthost_db_errors_total %llu\n", (unsigned long long)t->db_errors);
	ah_mx_family(f, "agenthost_db_retries_total", "counter",
	             "Database statements retried, by reason (lost connection, deadlock).");
	fprintf(f, "agenthost_db_retries_total{reason=\"connection_lost\"} %llu\n",
	        (unsigned long long)t->db_retries[AH_MX_RETRY_LOST]);
	fprintf(f, "agenthost_db_retries_total{reason=\"deadlock\"} %llu\n",
	        (unsigned long long)t->db_retries[AH_MX_RETRY_DEADLOCK]);
}
