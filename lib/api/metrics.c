/* See metrics.h. A route is counted under its row's index across the tables
 * (0: no route matched), so its label is the row's pattern (/agents/{slug}),
 * never the request's path: one series per row, however many agents. */
#include "api/metrics.h"
#include "core/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const ah_route *const *tables;

static unsigned table_len(const ah_route *t)
{
	unsigned n = 0;
	while (t[n].method)
		n++;
	return n;
}

static unsigned route_index(const ah_route *const *routes, const ah_route *rt)
{
	unsigned base = 1;
	for (size_t i = 0; rt && routes[i]; i++) {
		unsigned n = table_len(routes[i]);
		if (rt >= routes[i] && rt < routes[i] + n)
			return base + (unsigned)(rt - routes[i]);
		base += n;
	}
	return 0;
}

static void route_name(unsigned idx, const char **method, const char **pattern)
{
	*method = "any";
	*pattern = "unmatched";
	unsigned base = 1;
	for (size_t i = 0; idx && tables && tables[i]; i++) {
		unsigned n = table_len(tables[i]);
		if (idx < base + n) {
			*method = tables[i][idx - base].method;
			*pattern = tables[i][idx - base].pattern;
			return;
		}
		base += n;
	}
}

void ah_api_metrics_count(const ah_route *const *routes, const ah_route *rt, int status,
                          int64_t elapsed_us)
{
	ah_mx_request(route_index(routes, rt), status, elapsed_us);
}

bool ah_api_metrics_asked(ah_req *r)
{
	const char *uri = ah_param_env(r, "REQUEST_URI");
	const char *via = ah_param_env(r, "AGENTHOST_METRICS");
	return via && strcmp(via, "1") == 0 && uri && strncmp(uri, "/metrics", 8) == 0 && (uri[8] == '\0' || uri[8] == '?');
}

int ah_api_metrics_reply(ah_req *r, const ah_route *const *routes)
{
	char *body = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&body, &len);
	if (!f)
		return ah_reply_error(r, 500, "Internal server error");
	tables = routes;
	const ah_mx_slot *t = ah_mx_total();
	ah_mx_write_requests(f, t, route_name);
	ah_mx_write_invocations(f, t);
	ah_mx_write_db(f, t);
	fclose(f);
	int rc = ah_reply_raw(r, 200, "text/plain; version=0.0.4; charset=utf-8", body, len);
	free(body);
	return rc;
}
