/* Unit test of the model gateway's meter (lib/runner/gateway_usage.c), printed
 * as TAP: the provider's usage read from a JSON body or from server-sent
 * events, fed whole and in small pieces (answers stream through the gateway in
 * whatever pieces the network makes). One table row per case. */
#include "runner/gateway.h"

#include <stdbool.h>
#include <string.h>

#include "tap.h"

#define SSE_START "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":" \
	"{\"usage\":{\"input_tokens\":25,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\r\n\r\n"
#define SSE_TEXT "event: content_block_delta\ndata: {\"type\":\"content_block_delta\"," \
	"\"delta\":{\"type\":\"text_delta\",\"text\":\"usage\"}}\n\n"
#define SSE_DELTA(n) "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":" \
	"{\"output_tokens\":" #n "}}\n\n"

static const struct {
	const char *what, *ctype, *body;
	long long in, out;
	bool metered;       /* a meter is made for this content type */
} cases[] = {
	{"JSON body: input, cache writes and reads add up", "application/json",
	 "{\"type\":\"message\",\"usage\":{\"input_tokens\":10,\"cache_creation_input_tokens\":3,"
	 "\"cache_read_input_tokens\":2,\"output_tokens\":7}}", 15, 7, true},
	{"JSON body with a charset", "application/json; charset=utf-8",
	 "{\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}", 1, 2, true},
	{"JSON body without usage counts nothing", "application/json",
	 "{\"input_tokens\":99}", 0, 0, true},
	{"negative counts are not counted", "application/json",
	 "{\"usage\":{\"input_tokens\":-5,\"output_tokens\":3}}", 0, 3, true},
	{"malformed JSON counts nothing", "application/json",
	 "{\"usage\":{\"input_tokens\":5,", 0, 0, true},
	{"SSE: message_start, then the last message_delta wins", "text/event-stream",
	 SSE_START SSE_TEXT SSE_DELTA(12) SSE_DELTA(40), 30, 40, true},
	{"SSE: a usage-looking text delta is not usage", "text/event-stream",
	 SSE_TEXT, 0, 0, true},
	{"SSE without a final newline: the last line is not complete", "text/event-stream",
	 "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}", 0, 0, true},
	{"other content types are not metered", "text/plain", "{\"usage\":{\"input_tokens\":1}}",
	 0, 0, false},
	{"no content type is not metered", NULL, "", 0, 0, false},
};

/* Feeds body in pieces of `piece` bytes (0: whole) and returns the usage. */
static ah_gateway_usage run(const char *ctype, const char *body, size_t piece, bool *made)
{
	ah_gateway_usage u = {0};
	ah_gw_meter *m = ah_gw_meter_new(ctype);
	size_t len = strlen(body);
	*made = m != NULL;
	for (size_t off = 0; off < len;) {
		size_t n = piece && len - off > piece ? piece : len - off;
		ah_gw_meter_feed(m, body + off, n);
		off += n;
	}
	ah_gw_meter_finish(m, &u);
	return u;
}

int main(void)
{
	static const size_t pieces[] = {0, 1, 7};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		for (size_t p = 0; p < sizeof pieces / sizeof pieces[0]; p++) {
			bool made;
			ah_gateway_usage u = run(cases[i].ctype, cases[i].body, pieces[p], &made);
			ok(made == cases[i].metered && u.input_tokens == cases[i].in &&
			   u.output_tokens == cases[i].out, "%s (pieces of %zu): in %lld out %lld",
			   cases[i].what, pieces[p], u.input_tokens, u.output_tokens);
		}
	}
	ah_gateway_usage sum = {0};
	for (int k = 0; k < 2; k++) {
		ah_gw_meter *m = ah_gw_meter_new("application/json");
		ah_gw_meter_feed(m, cases[0].body, strlen(cases[0].body));
		ah_gw_meter_finish(m, &sum);
	}
	ok(sum.input_tokens == 30 && sum.output_tokens == 14, "two answers add up");

	/* The provider's error (issue 27): a failed invocation names it. */
	bool made;
	ah_gateway_usage e = run("application/json", "{\"type\":\"error\",\"error\":{\"type\":"
	                         "\"rate_limit_error\",\"message\":\"slow\\ndown\"}}", 3, &made);
	ok(strcmp(e.error, "rate_limit_error: slow?down") == 0, "JSON error body: %s", e.error);
	e = run("text/event-stream", SSE_START "event: error\ndata: {\"type\":\"error\",\"error\":"
	        "{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", 5, &made);
	ok(strcmp(e.error, "overloaded_error: Overloaded") == 0 && e.input_tokens == 30,
	   "SSE error event after message_start: %s", e.error);
	e = run("application/json", cases[0].body, 0, &made);
	ok(e.error[0] == '\0', "a good answer has no error");
	return tap_done();
}
