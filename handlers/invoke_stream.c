/* POST /agents/{slug}/invoke answered as server-sent events (issue 28), when
 * the body says "stream": true or the client accepts only text/event-stream:
 *   event: start   {"invocation_id", "session_id"} (what GET and cancel name)
 *   event: output  {"text"}: the agent's stdout as the runner passes it on,
 *                  in order, never a UTF-8 character split across two events
 *   : keep-alive   a comment after stream_keepalive_seconds (15) without an
 *                  event (proxies keep the connection)
 *   event: done    exactly the body a plain call answers with 200
 *   event: error   exactly the body a plain call answers with an error status
 *                  ({"detail", "invocation"}; 503: {"detail"} and nothing ran)
 * The head goes out before the run starts, with the rate-limit headers and
 * X-Accel-Buffering: no (nginx passes each event on at once). The call runs,
 * is capped and is recorded exactly as a plain one (ah_call_run): a client
 * that goes away does not stop it. */
#include "invoke.h"
#include "running.h"
#include "core/log.h"
#include "core/util.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

typedef struct sse {
	ah_req *r;
	unsigned char carry[4]; /* the start of a character the next chunk ends */
	size_t ncarry;
	int64_t last;           /* when something was last written */
	int64_t keepalive_ms;   /* a comment after this long without one */
	bool gone;              /* the client went away: the call goes on */
} sse;

static void sse_put(sse *s, const char *p, size_t n)
{
	if (!s->gone && ah_stream_write(s->r, p, n) != 0) {
		s->gone = true;
		ah_log_info("a streaming client went away; the call goes on and is recorded");
	}
	s->last = ah_now_ms();
}

/* One event: its data is one line of JSON (newlines in it are escaped). */
static void sse_event(sse *s, const char *name, json_object *data)
{
	size_t len;
	const char *body = ah_json_body(data, &len);
	const char *ev = ah_sprintf(s->r->arena, "event: %s\ndata: %.*s\n\n", name, (int)len, body);
	sse_put(s, ev, strlen(ev));
	json_object_put(data);
}

/* How many of buf's n bytes end on a character's boundary: an incomplete
 * sequence at the end (at most 3 bytes) waits for the next chunk. */
static size_t whole_chars(const unsigned char *buf, size_t n)
{
	for (size_t back = 1; back <= 4 && back <= n; back++) {
		unsigned char c = buf[n - back];
		if ((c & 0xC0) == 0x80)
			continue; /* a continuation byte: its lead is further back */
		size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
		return need > back ? n - back : n;
	}
	return n; /* no lead byte within reach: not UTF-8; passed on (repaired) */
}

static void emit_text(sse *s, const char *p, size_t n)
{
	if (!n)
		return;
	size_t len;
	const char *t = ah_utf8_repair(s->r->arena, p, n, &len);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "text", json_object_new_string_len(t, (int)len));
	sse_event(s, "output", o);
}

static void on_chunk(void *ctx, const char *data, size_t len)
{
	sse *s = ctx;
	if (!data) {
		if (ah_now_ms() - s->last >= s->keepalive_ms)
			sse_put(s, ": keep-alive\n\n", 14);
		return;
	}
	unsigned char *buf = malloc(s->ncarry + len);
	if (!buf)
		return;
	memcpy(buf, s->carry, s->ncarry);
	memcpy(buf + s->ncarry, data, len);
	size_t n = s->ncarry + len, cut = whole_chars(buf, n);
	emit_text(s, (const char *)buf, cut);
	s->ncarry = n - cut;
	memcpy(s->carry, buf + cut, s->ncarry);
	free(buf);
}

bool ah_invoke_wants_stream(ah_req *r)
{
	const char *accept = ah_param_env(r, "HTTP_ACCEPT");
	return accept && strstr(accept, "text/event-stream") && !strstr(accept, "application/json");
}

/* The end: the plain call's body as done (200) or error (any other status). */
static void finish(sse *s, ah_call *c)
{
	ah_req *r = s->r;
	emit_text(s, (const char *)s->carry, s->ncarry); /* the agent ended mid-character */
	if (c->o.http == 503) {
		json_object *e = json_object_new_object();
		ah_json_str(e, "detail", c->o.detail);
		ah_json_int(e, "retry_after", c->o.retry_after);
		sse_event(s, "error", e);
		return;
	}
	json_object *res = ah_invocation_json(r, &c->inv, false);
	json_object_object_add(res, "files", c->o.files ? json_object_get(c->o.files) : json_object_new_array());
	if (c->o.http == 200) {
		sse_event(s, "done", res);
		return;
	}
	json_object *body = json_object_new_object();
	ah_json_str(body, "detail", c->o.detail);
	json_object_object_add(body, "invocation", res);
	sse_event(s, "error", body);
}

int ah_invoke_stream(ah_req *r, ah_call *c)
{
	sse s = {.r = r, .last = ah_now_ms(),
	         .keepalive_ms = ah_settings_of(r->cfg)->invoke.stream_keepalive_seconds * 1000};
	/* nginx closes the connection of a client that left: a write to it
	 * must fail, not end the worker. */
	void (*old)(int) = signal(SIGPIPE, SIG_IGN);
	ah_header(r, "Cache-Control", "no-cache");
	ah_header(r, "X-Accel-Buffering", "no");
	if (ah_stream_begin(r, 200, "text/event-stream; charset=utf-8") != 0)
		s.gone = true;
	/* Seen by GET …/invocations/{id} and cancellable while it streams: from
	 * before the start event names it. */
	bool tracked = ah_running_begin(r, c) == 0;
	json_object *start = json_object_new_object();
	ah_json_str(start, "invocation_id", c->inv.id);
	ah_json_str(start, "session_id", c->inv.session_id);
	sse_event(&s, "start", start);
	c->on_chunk = on_chunk;
	c->chunk_ctx = &s;
	ah_call_run(r, c);
	if (tracked)
		ah_running_end(r, c);
	finish(&s, c);
	signal(SIGPIPE, old);
	return AH_EDONE;
}
