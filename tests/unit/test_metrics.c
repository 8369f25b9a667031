/* Unit test of lib/core/metrics: the slots a forked child counts into are the
 * ones its parent sums, a histogram's bounds are inclusive (le), cost text is
 * summed exactly in pico-dollars, and the exposition's lines. Printed as TAP. */
#include "core/metrics.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

static char *render(void (*write)(FILE *, const ah_mx_slot *))
{
	char *body = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&body, &len);
	write(f, ah_mx_total());
	fclose(f);
	return body;
}

static void has(const char *text, const char *line)
{
	ok(strstr(text, line) != NULL, "exposition has: %s", line);
}

static void name_route(unsigned route, const char **method, const char **pattern)
{
	*method = route == 3 ? "POST" : "any";
	*pattern = route == 3 ? "/agents/{slug}/invoke" : "unmatched";
}

static void write_requests(FILE *f, const ah_mx_slot *t)
{
	ah_mx_write_requests(f, t, name_route);
}

int main(void)
{
	ok(ah_mx_shared_init(3) == 0, "three shared slots");
	/* Two children count into slots 2 and then 0; the parent sums them (the
	 * slots taken only ever grow: the later, lower one keeps slot 2 summed). */
	for (unsigned slot = 2; slot < 3; slot = slot ? 0 : 3) {
		pid_t pid = fork();
		if (pid == 0) {
			ah_mx_use(slot);
			ah_mx_request(3, 200, 1000);     /* exactly 1 ms: in le="0.001" */
			ah_mx_request(3, 200, 1001);     /* just over: in le="0.0025" */
			ah_mx_request(3, 299, 5);        /* a status outside the list */
			ah_mx_request(4000, 404, 5);     /* a route past the table: the last one */
			ah_mx_invocation(AH_MX_INV_COMPLETED, 1500, 16, 4, "0.000117000000");
			ah_mx_invocation(AH_MX_INV_FAILED, 700000, 0, 0, "1.5");
			ah_mx_db_retry(AH_MX_RETRY_DEADLOCK);
			ah_mx_db_error();
			_exit(0);
		}
		int st = 0;
		waitpid(pid, &st, 0);
		ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child counting into slot %u", slot);
	}
	char *req = render(write_requests);
	has(req, "agenthost_http_requests_total{route=\"/agents/{slug}/invoke\",method=\"POST\",code=\"200\"} 4\n");
	has(req, "agenthost_http_requests_total{route=\"/agents/{slug}/invoke\",method=\"POST\",code=\"other\"} 2\n");
	has(req, "agenthost_http_request_duration_seconds_bucket{route=\"/agents/{slug}/invoke\",method=\"POST\",le=\"0.001\"} 4\n");
	has(req, "agenthost_http_request_duration_seconds_bucket{route=\"/agents/{slug}/invoke\",method=\"POST\",le=\"0.0025\"} 6\n");
	has(req, "agenthost_http_request_duration_seconds_bucket{route=\"/agents/{slug}/invoke\",method=\"POST\",le=\"+Inf\"} 6\n");
	has(req, "agenthost_http_request_duration_seconds_count{route=\"/agents/{slug}/invoke\",method=\"POST\"} 6\n");
	has(req, "agenthost_http_request_duration_seconds_sum{route=\"/agents/{slug}/invoke\",method=\"POST\"} 0.004012\n");
	ok(strstr(req, "code=\"404\"} 2\n") != NULL, "a route index past the table is counted, not dropped");
	free(req);
	char *inv = render(ah_mx_write_invocations);
	has(inv, "agenthost_invocations_total{status=\"completed\"} 2\n");
	has(inv, "agenthost_invocations_total{status=\"failed\"} 2\n");
	has(inv, "agenthost_invocation_duration_seconds_bucket{le=\"2\"} 2\n");
	has(inv, "agenthost_invocation_duration_seconds_bucket{le=\"600\"} 2\n");
	has(inv, "agenthost_invocation_duration_seconds_bucket{le=\"+Inf\"} 4\n");
	has(inv, "agenthost_invocation_tokens_total{kind=\"input\"} 32\n");
	has(inv, "agenthost_invocation_cost_usd_total 3.000234000000\n");
	free(inv);
	char *db = render(ah_mx_write_db);
	has(db, "agenthost_db_errors_total 2\n");
	has(db, "agenthost_db_retries_total{reason=\"deadlock\"} 2\n");
	has(db, "agenthost_db_retries_total{reason=\"connection_lost\"} 0\n");
	free(db);
	return tap_done();
}
