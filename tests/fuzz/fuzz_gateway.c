/* Fuzz target: the model gateway's reading of what an agent sends — the
 * request head (the runner parses it with the real model key in memory) and
 * the provider's streamed answer through the usage meter. Input: the head
 * (bytes up to the first NUL) then, after it, the answer body for the meter.
 * Property: a parsed head names a method and a target inside the input. */
#include "runner/gateway_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct exchange x;

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
		ah_gw_meter_feed(m, (const char *)data + off, n);
		off += n;
	}
	ah_gateway_usage u = {0};
	ah_gw_meter_finish(m, &u);
	if (u.input_tokens < 0 || u.output_tokens < 0)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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
		gw_hop_by_hop(x.method);
	}
	curl_slist_free_all(x.hdrs);
	if (nul)
		meter(nul + 1, size - hlen - 1);
	return 0;
}
