/* The model gateway's policy: which requests it forwards and which of the
 * provider's answer headers it passes back, read from the configuration
 * (model_gateway_endpoints, model_gateway_response_headers). See
 * gateway_int.h.
 *
 * Fail closed: the gateway forwards only endpoints whose cost it can read
 * (`usage`: the answer carries the provider's usage) or that cost nothing
 * (`free`); anything else — Message Batches, whose results come later and
 * outside any one call, included — is refused before it leaves the sandbox.
 * Answer headers pass only by name, so a provider's cookies, account or
 * organisation headers never reach an agent. */
#include "runner/gateway_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* RFC 9110 tchar: what a method or a header name is made of. */
bool gw_tchar(int c)
{
	return c > 0 && c < 127 && (isalnum(c) || strchr("!#$%&'*+-.^_`|~", c));
}

static bool all_tchars(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!gw_tchar((unsigned char)s[i]))
			return false;
	return n > 0;
}

/* The next comma-separated entry of *p, trimmed, into out; false at the end. */
static bool next_entry(const char **p, char *out, size_t cap, bool *too_long)
{
	const char *s = *p;
	s += strspn(s, " \t,");
	if (!*s)
		return false;
	size_t n = strcspn(s, ",");
	*p = s + n;
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	*too_long = n >= cap;
	snprintf(out, cap, "%.*s", (int)n, s);
	return true;
}

/* "/v1/...": letters, digits and -_./ only, no dot segment, no query. */
static bool path_ok(const char *p)
{
	if (strncmp(p, "/v1/", 4) != 0 || strstr(p, "..") || strstr(p, "//"))
		return false;
	for (; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("-_./", *p))
			return false;
	return true;
}

static int add_route(struct gw_policy *pol, const char *entry, ah_err *err)
{
	struct gw_route *r = &pol->routes[pol->n_routes];
	char kind[16], extra[2];
	if (pol->n_routes == GW_ROUTES_MAX)
		return ah_err_set(err, AH_EINVALID, "model_gateway_endpoints: more than %d endpoints",
		                  GW_ROUTES_MAX);
	if (sscanf(entry, "%7s %127s %15s %1s", r->method, r->path, kind, extra) != 3 ||
	    (strcmp(r->method, "GET") && strcmp(r->method, "POST") && strcmp(r->method, "DELETE")) ||
	    !path_ok(r->path) || (strcmp(kind, "usage") && strcmp(kind, "free")))
		return ah_err_set(err, AH_EINVALID, "model_gateway_endpoints: \"%s\": expected "
		                  "METHOD /v1/path usage|free (METHOD: GET, POST or DELETE)", entry);
	r->metered = strcmp(kind, "usage") == 0;
	pol->n_routes++;
	return 0;
}

static int add_header(struct gw_policy *pol, const char *entry, ah_err *err)
{
	size_t n = strlen(entry);
	bool prefix = n > 0 && entry[n - 1] == '*';
	if (pol->n_resp == GW_RESP_MAX)
		return ah_err_set(err, AH_EINVALID, "model_gateway_response_headers: more than %d "
		                  "names", GW_RESP_MAX);
	if (!all_tchars(entry, n - prefix) || strchr(entry, '*') != (prefix ? entry + n - 1 : NULL))
		return ah_err_set(err, AH_EINVALID, "model_gateway_response_headers: \"%s\" is not a "
		                  "header name (or a prefix ending in *)", entry);
	snprintf(pol->resp[pol->n_resp++], sizeof pol->resp[0], "%.63s", entry);
	return 0;
}

int gw_policy_load(struct gw_policy *pol, const ah_config *cfg, ah_err *err)
{
	char entry[256];
	bool too_long;
	int rc = 0;
	memset(pol, 0, sizeof *pol);
	const char *p = ah_settings_of(cfg)->model.endpoints;
	while (rc == 0 && next_entry(&p, entry, sizeof entry, &too_long))
		rc = too_long ? ah_err_set(err, AH_EINVALID, "model_gateway_endpoints: an entry is "
		                           "too long") : add_route(pol, entry, err);
	p = ah_settings_of(cfg)->model.response_headers;
	while (rc == 0 && next_entry(&p, entry, sizeof pol->resp[0], &too_long))
		rc = too_long ? ah_err_set(err, AH_EINVALID, "model_gateway_response_headers: a name "
		                           "is too long") : add_header(pol, entry, err);
	return rc;
}

const struct gw_route *gw_policy_route(const struct gw_policy *pol, const char *method,
                                       const char *target)
{
	size_t n = strcspn(target, "?"); /* a query passes (the SDKs' ?beta=true) */
	for (int i = 0; i < pol->n_routes; i++) {
		const struct gw_route *r = &pol->routes[i];
		if (strcmp(r->method, method) == 0 && strlen(r->path) == n &&
		    strncmp(r->path, target, n) == 0)
			return r;
	}
	return NULL;
}

bool gw_policy_header_out(const struct gw_policy *pol, const char *name)
{
	for (int i = 0; i < pol->n_resp; i++) {
		const char *a = pol->resp[i];
		size_t n = strlen(a);
		if (a[n - 1] == '*' ? strncasecmp(a, name, n - 1) == 0 : strcasecmp(a, name) == 0)
			return !gw_hop_by_hop(name);
	}
	return false;
}
