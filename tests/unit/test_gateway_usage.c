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
#define SSE_STOP "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
#define JSON_USAGE "{\"type\":\"message\",\"usage\":{\"input_tokens\":10," \
	"\"cache_creation_input_tokens\":3,\"cache_read_input_tokens\":2,\"output_tokens\":7}}"

/* in: all input; cw, cr: its cache parts; read: the usage could be read (else
 * the gateway ends the invocation's model access). */
static const struct {
	const char *what, *ctype, *body;
	long long in, cw, cr, out;
	bool read;
	long long cw1h;     /* the part of cw kept for an hour */
} cases[] = {
	{"JSON body: input, cache writes and reads add up, the cache kept apart", "application/json",
	 JSON_USAGE, 15, 3, 2, 7, true},
	{"JSON body and trailing whitespace", "application/json", JSON_USAGE "\r\n", 15, 3, 2, 7, true},
	{"JSON body with a charset", "application/json; charset=utf-8",
	 "{\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}", 1, 0, 0, 2, true},
	{"1-hour cache writes are part of the writes", "application/json", "{\"usage\":{"
	 "\"input_tokens\":1,\"cache_creation_input_tokens\":9,\"cache_creation\":"
	 "{\"ephemeral_5m_input_tokens\":5,\"ephemeral_1h_input_tokens\":4},\"output_tokens\":2}}",
	 10, 9, 0, 2, true, 4},
	{"more 1-hour writes than writes: unreadable", "application/json", "{\"usage\":{"
	 "\"input_tokens\":1,\"cache_creation_input_tokens\":3,\"cache_creation\":"
	 "{\"ephemeral_1h_input_tokens\":4},\"output_tokens\":2}}", 0, 0, 0, 0, false},
	{"null cache counts are none", "application/json", "{\"usage\":{\"input_tokens\":1,"
	 "\"cache_read_input_tokens\":null,\"output_tokens\":2}}", 1, 0, 0, 2, true},
	{"JSON body without usage: unreadable", "application/json", "{\"input_tokens\":99}",
	 0, 0, 0, 0, false},
	{"usage without output_tokens: unreadable", "application/json",
	 "{\"usage\":{\"input_tokens\":4}}", 0, 0, 0, 0, false},
	{"negative counts: unreadable", "application/json",
	 "{\"usage\":{\"input_tokens\":-5,\"output_tokens\":3}}", 0, 0, 0, 0, false},
	{"a count that is text: unreadable", "application/json",
	 "{\"usage\":{\"input_tokens\":\"5\",\"output_tokens\":3}}", 0, 0, 0, 0, false},
	{"a count beyond any real one: unreadable", "application/json",
	 "{\"usage\":{\"input_tokens\":1000000000001,\"output_tokens\":3}}", 0, 0, 0, 0, false},
	{"malformed JSON: unreadable", "application/json", "{\"usage\":{\"input_tokens\":5,",
	 0, 0, 0, 0, false},
	{"a second value after the body: unreadable", "application/json", JSON_USAGE JSON_USAGE,
	 0, 0, 0, 0, false},
	{"an empty answer: unreadable", "application/json", "", 0, 0, 0, 0, false},
	{"SSE: message_start, then the last message_delta wins", "text/event-stream",
	 SSE_START SSE_TEXT SSE_DELTA(12) SSE_DELTA(40) SSE_STOP, 30, 0, 5, 40, true},
	{"SSE: an error event and no message costs nothing", "text/event-stream",
	 "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n",
	 0, 0, 0, 0, true},
	{"SSE: a usage-looking text delta is not usage", "text/event-stream",
	 SSE_TEXT SSE_STOP, 0, 0, 0, 0, false},
	{"SSE cut before message_stop: what was read counts, unreadable", "text/event-stream",
	 SSE_START SSE_DELTA(9), 30, 0, 5, 9, false},
	{"SSE: a data line that is not JSON: unreadable", "text/event-stream",
	 SSE_START "data: usage\n\n" SSE_STOP, 30, 0, 5, 1, false},
	{"SSE: message_delta before message_start: unreadable", "text/event-stream",
	 SSE_DELTA(9) SSE_START SSE_STOP, 0, 0, 0, 0, false},
	{"other content types: unreadable", "text/plain", "{\"usage\":{\"input_tokens\":1}}",
	 0, 0, 0, 0, false},
	{"no content type: unreadable", NULL, "", 0, 0, 0, 0, false},
};

/* Feeds body in pieces of `piece` bytes (0: whole) and returns the usage. */
static ah_gateway_usage run(const char *ctype, const char *body, size_t piece, bool *read)
{
	ah_gateway_usage u = {0};
	ah_gw_meter *m = ah_gw_meter_new(ctype);
	size_t len = strlen(body);
	for (size_t off = 0; off < len;) {
		size_t n = piece && len - off > piece ? piece : len - off;
		ah_gw_meter_feed(m, body + off, n);
		off += n;
	}
	const char *why = NULL;
	*read = ah_gw_meter_finish(m, &u, &why) == 0 && why == NULL;
	return u;
}

/* A JSON body over the 16 MiB cap: the meter says so as soon as it is over,
 * so the gateway stops passing it on. */
static void over_the_cap(void)
{
	static char piece[1 << 16];
	ah_gw_meter *m = ah_gw_meter_new("application/json");
	int rc = ah_gw_meter_feed(m, "[\"", 2);
	memset(piece, 'a', sizeof piece);
	size_t fed = 2;
	while (rc == 0 && fed <= (17u << 20)) {
		rc = ah_gw_meter_feed(m, piece, sizeof piece);
		fed += sizeof piece;
	}
	ah_gateway_usage u = {0};
	const char *why = NULL;
	ok(rc != 0 && fed > (16u << 20) && fed <= (16u << 20) + sizeof piece + 2 &&
	   ah_gw_meter_finish(m, &u, &why) != 0 && why && strstr(why, "16 MiB"),
	   "a JSON body over 16 MiB is refused as it passes the cap (%s)", why ? why : "");
}

int main(void)
{
	static const size_t pieces[] = {0, 1, 7};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		for (size_t p = 0; p < sizeof pieces / sizeof pieces[0]; p++) {
			bool read;
			ah_gateway_usage u = run(cases[i].ctype, cases[i].body, pieces[p], &read);
			ok(read == cases[i].read && u.input_tokens == cases[i].in &&
			   u.cache_write_tokens == cases[i].cw && u.cache_read_tokens == cases[i].cr &&
			   u.output_tokens == cases[i].out && u.cache_write_1h_tokens == cases[i].cw1h, "%s (pieces of %zu): read %d in %lld (%lld+%lld "
			   "cache) out %lld", cases[i].what, pieces[p], read, u.input_tokens,
			   u.cache_write_tokens, u.cache_read_tokens, u.output_tokens);
		}
	}
	ah_gateway_usage sum = {0};
	for (int k = 0; k < 2; k++) {
		ah_gw_meter *m = ah_gw_meter_new("application/json");
		ah_gw_meter_feed(m, JSON_USAGE, strlen(JSON_USAGE));
		ah_gw_meter_finish(m, &sum, NULL);
	}
	ok(sum.input_tokens == 30 && sum.output_tokens == 14 && sum.cache_write_tokens == 6,
	   "two answers add up");
	ok(ah_gw_meter_finish(NULL, &sum, NULL) != 0, "no meter (out of memory): unreadable");
	over_the_cap();

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
