/* Fuzz target: the model gateway's reading of what an agent sends — the
 * request head (the runner parses it with the real model key in memory) and
 * the endpoint policy that decides what is forwarded — and the provider's
 * streamed answer through the usage meter. Input: the head (bytes up to the
 * first NUL) then, after it, the answer body for the meter.
 * Properties:
 *  - a parsed head names a method (token characters only) and a target
 *    (visible ASCII) inside the input; every header it would forward has a
 *    token name, a value without CR, LF or NUL, and is neither a credential
 *    nor hop-by-hop;
 *  - an endpoint the policy lets through is one of the configured ones, the
 *    target's path exactly (a query aside);
 *  - the meter's counts are never negative, its cache parts never exceed the
 *    input they are part of, and it gives a reason exactly when it could not
 *    read the usage. */
#include "runner/gateway_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct exchange x;
static struct gw_policy policy;

/* The shipped defaults (model_gateway_endpoints and
 * model_gateway_response_headers as config_keys.h has them). */
static void load_policy(void)
{
	static int loaded;
	if (loaded++)
		return;
	ah_config *cfg = NULL;
	ah_err err = {0};
	if (ah_config_load(&cfg, "/dev/null", &err) != 0 || gw_policy_load(&policy, cfg, &err) != 0)
		abort();
	ah_config_free(cfg);
}

static void meter(const uint8_t *data, size_t size)
{
	static const char *const types[] = { "text/event-stream", "application/json", "" };
	ah_gw_meter *m = ah_gw_meter_new(types[size % 3]);
	if (!m)
		return;
	/* in pieces, as curl hands them over */
	for (size_t off = 0; off < size;) {
		size_t n = 1 + (data[off] % 97);
		n = n > size - off ? size - off : n;
		if (ah_gw_meter_feed(m, (const char *)data + off, n) != 0)
			break; /* the gateway stops passing the answer here */
		off += n;
	}
	ah_gateway_usage u = {0};
	const char *why = NULL;
	int rc = ah_gw_meter_finish(m, &u, &why);
	if (u.input_tokens < 0 || u.output_tokens < 0 || u.cache_write_tokens < 0 ||
	    u.cache_read_tokens < 0 || u.cache_write_tokens + u.cache_read_tokens > u.input_tokens ||
	    (rc == 0) != (why == NULL))
		__builtin_trap();
}

static void check_forwarded(void)
{
	for (struct curl_slist *h = x.hdrs; h; h = h->next) {
		char *colon = strchr(h->data, ':');
		if (!colon || colon == h->data || strpbrk(h->data, "\r\n"))
			__builtin_trap();
		*colon = '\0';
		for (const char *c = h->data; *c; c++)
			if (!gw_tchar((unsigned char)*c))
				__builtin_trap();
		if (gw_hop_by_hop(h->data))
			__builtin_trap();
	}
}

static void check_route(void)
{
	const struct gw_route *r = gw_policy_route(&policy, x.method, x.target);
	if (!r)
		return;
	size_t n = strcspn(x.target, "?");
	if (strcmp(r->method, x.method) != 0 || strlen(r->path) != n ||
	    strncmp(r->path, x.target, n) != 0)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	load_policy();
	const uint8_t *nul = memchr(data, 0, size);
	size_t hlen = nul ? (size_t)(nul - data) : size;
	if (hlen > HEAD_CAP)
		hlen = HEAD_CAP;
	memset(&x, 0, sizeof x);
	memcpy(x.in, data, hlen);
	x.in[hlen] = '\0';
	x.in_len = hlen;
	x.content_length = -1;
	char *end = strstr(x.in, "\r\n\r\n");
	x.head_len = end ? (size_t)(end - x.in) + 4 : hlen;
	if (end && gw_parse_head(&x) == 0) {
		if (!x.method || !x.target || x.method < x.in || x.target > x.in + hlen)
			__builtin_trap();
		for (const char *c = x.method; *c; c++)
			if (!gw_tchar((unsigned char)*c))
				__builtin_trap();
		for (const char *c = x.target; *c; c++)
			if (*c <= ' ' || *c >= 127)
				__builtin_trap();
		check_route();
		gw_policy_header_out(&policy, x.method);
		check_forwarded();
	}
	curl_slist_free_all(x.hdrs);
	if (nul)
		meter(nul + 1, size - hlen - 1);
	return 0;
}
