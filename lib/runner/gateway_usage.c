/* The provider's own token counts in its answers, read as the answer streams
 * through the gateway (Anthropic's Messages API):
 *   - a JSON body: top-level "usage" {"input_tokens","output_tokens",
 *     "cache_creation_input_tokens","cache_read_input_tokens"};
 *   - server-sent events: "message_start" carries message.usage, each
 *     "message_delta" carries usage whose counts are cumulative (the last one
 *     wins), and "message_stop" ends the message.
 * Input counts all three input figures (cache writes and reads are input the
 * provider processed), and the two cache figures are also kept apart, with
 * the writes kept for an hour (cache_creation.ephemeral_1h_input_tokens): they
 * are priced apart.
 *
 * Fail closed: an answer of an endpoint that costs tokens either yields its
 * usage or says why it cannot (not JSON or SSE, over the caps, malformed, no
 * usage, a stream that ended before message_stop), and the gateway then ends
 * the invocation's model access. Caps keep a hostile or broken answer from
 * costing more than a bounded amount of memory. */
#include "runner/gateway.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define JSON_CAP (16 << 20) /* body bytes parsed at most */
#define LINE_CAP (1 << 20)  /* one SSE line */

#define COUNT_MAX 1000000000000LL /* a count beyond this is not a count */

struct ah_gw_meter {
	bool sse;
	const char *why;    /* set once the answer cannot be read */
	json_tokener *tok;  /* JSON body */
	json_object *body;
	size_t fed;
	char *line;         /* SSE: the line being read */
	size_t line_len;
	long long in, cw, cr, cw1h, out;
	bool started, stopped, error_event; /* SSE: message_start, message_stop, error */
	char error[200];    /* "TYPE: MESSAGE" of an error the answer carried */
};

ah_gw_meter *ah_gw_meter_new(const char *content_type)
{
	bool sse = content_type && strncasecmp(content_type, "text/event-stream", 17) == 0;
	bool json = content_type && strncasecmp(content_type, "application/json", 16) == 0;
	ah_gw_meter *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->sse = sse;
	if (!sse && !json) {
		m->why = "neither JSON nor server-sent events";
		return m;
	}
	m->tok = sse ? NULL : json_tokener_new();
	m->line = sse ? malloc(LINE_CAP) : NULL;
	if (sse ? !m->line : !m->tok) {
		free(m);
		return NULL;
	}
	return m;
}

/* One count of a usage object into *n: absent or null leaves it; a count that
 * is not a whole number in [0, COUNT_MAX] makes the usage unreadable. */
static bool count(json_object *usage, const char *key, long long *n, bool *present)
{
	json_object *v;
	if (!json_object_object_get_ex(usage, key, &v) || v == NULL)
		return true;
	if (!json_object_is_type(v, json_type_int))
		return false;
	long long x = json_object_get_int64(v);
	if (x < 0 || x > COUNT_MAX)
		return false;
	*n = x;
	*present = true;
	return true;
}

/* The 1-hour part of the cache writes: usage.cache_creation (absent or null:
 * the count stays) holds ephemeral_1h_input_tokens. */
static bool count_1h(json_object *usage, long long *n)
{
	json_object *cc;
	bool present = false;
	if (!json_object_object_get_ex(usage, "cache_creation", &cc) || cc == NULL)
		return true;
	return json_object_is_type(cc, json_type_object) &&
	       count(cc, "ephemeral_1h_input_tokens", n, &present);
}

/* A usage object: each count present replaces the one before (a stream's
 * counts are cumulative). need_in, need_out: counts it must carry. */
static bool take_usage(ah_gw_meter *m, json_object *usage, bool need_in, bool need_out)
{
	bool has_in = false, has_out = false, cache = false;
	if (!usage || !json_object_is_type(usage, json_type_object))
		return false;
	long long in = m->in, cw = m->cw, cr = m->cr, cw1h = m->cw1h, out = m->out;
	if (!count(usage, "input_tokens", &in, &has_in) || !count(usage, "output_tokens", &out, &has_out) ||
	    !count(usage, "cache_creation_input_tokens", &cw, &cache) ||
	    !count(usage, "cache_read_input_tokens", &cr, &cache) || !count_1h(usage, &cw1h) ||
	    cw1h > cw || (need_in && !has_in) || (need_out && !has_out))
		return false;
	m->in = in, m->cw = cw, m->cr = cr, m->cw1h = cw1h, m->out = out;
	return true;
}

static json_object *member(json_object *o, const char *key)
{
	json_object *v = NULL;
	if (o && json_object_is_type(o, json_type_object))
		json_object_object_get_ex(o, key, &v);
	return v;
}

/* {"type":"error","error":{"type","message"}}: kept as printable ASCII, cut. */
static void take_error(ah_gw_meter *m, json_object *e)
{
	const char *type = json_object_get_string(member(e, "type"));
	const char *msg = json_object_get_string(member(e, "message"));
	if (!e || (!type && !msg))
		return;
	snprintf(m->error, sizeof m->error, "%s: %s", type ? type : "error", msg ? msg : "");
	for (char *p = m->error; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
}

/* One event's data. A data line that is not a JSON object with a "type" is
 * an answer we do not understand. */
static void sse_event(ah_gw_meter *m, const char *data)
{
	json_object *ev = json_tokener_parse(data);
	const char *type = json_object_get_string(member(ev, "type"));
	if (!type || !json_object_is_type(member(ev, "type"), json_type_string))
		m->why = "a streamed event that is not the provider's";
	else if (strcmp(type, "message_start") == 0) {
		if (m->started || !take_usage(m, member(member(ev, "message"), "usage"), true, true))
			m->why = "message_start without usage";
		m->started = true;
	} else if (strcmp(type, "message_delta") == 0) {
		if (!m->started || !take_usage(m, member(ev, "usage"), false, true))
			m->why = "message_delta without usage";
	} else if (strcmp(type, "message_stop") == 0) {
		m->stopped = m->started;
	} else if (strcmp(type, "error") == 0) { /* e.g. overloaded mid-stream */
		m->error_event = true;
		take_error(m, member(ev, "error"));
	}
	json_object_put(ev);
}

static void sse_line(ah_gw_meter *m)
{
	char *l = m->line;
	size_t n = m->line_len;
	if (n > 0 && l[n - 1] == '\r')
		n--;
	l[n] = '\0';
	if (n >= 5 && strncmp(l, "data:", 5) == 0)
		sse_event(m, l + 5);
}

static void sse_feed(ah_gw_meter *m, const char *data, size_t len)
{
	for (size_t i = 0; i < len && !m->why; i++) {
		if (data[i] == '\n') {
			sse_line(m);
			m->line_len = 0;
		} else if (m->line_len < LINE_CAP - 1) {
			m->line[m->line_len++] = data[i];
		} else {
			m->why = "a streamed line over 1 MiB";
		}
	}
}

static bool only_space(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strchr(" \t\r\n", p[i]) || p[i] == '\0')
			return false;
	return true;
}

static void json_feed(ah_gw_meter *m, const char *data, size_t len)
{
	if (m->body) { /* whitespace may follow the value, nothing else */
		if (!only_space(data, len))
			m->why = "data after the JSON body";
		return;
	}
	m->fed += len;
	if (m->fed > JSON_CAP) {
		m->why = "a JSON body over 16 MiB";
		return;
	}
	m->body = json_tokener_parse_ex(m->tok, data, (int)len);
	size_t end = json_tokener_get_parse_end(m->tok);
	if (!m->body && json_tokener_get_error(m->tok) != json_tokener_continue)
		m->why = "malformed JSON";
	else if (m->body && end < len && !only_space(data + end, len - end))
		m->why = "data after the JSON body";
}

int ah_gw_meter_feed(ah_gw_meter *m, const char *data, size_t len)
{
	if (!m)
		return -1;
	if (!m->why) {
		if (m->sse)
			sse_feed(m, data, len);
		else
			json_feed(m, data, len);
	}
	return m->why ? -1 : 0;
}

/* Why the whole answer yields no usage, or NULL when it did. */
static const char *verdict(ah_gw_meter *m)
{
	if (m->why)
		return m->why;
	if (m->sse) {
		if (!m->started)
			return m->error_event ? NULL : "a stream without message_start";
		return m->stopped ? NULL : "a stream that ended before message_stop";
	}
	if (!m->body)
		return m->fed ? "a JSON body cut short" : "an empty answer";
	return take_usage(m, member(m->body, "usage"), true, true) ? NULL : "no usage in the answer";
}

int ah_gw_meter_finish(ah_gw_meter *m, ah_gateway_usage *u, const char **why)
{
	const char *w = m ? verdict(m) : "out of memory";
	if (m && !m->sse && m->body)
		take_error(m, member(m->body, "error"));
	if (m && m->error[0])
		snprintf(u->error, sizeof u->error, "%s", m->error);
	if (m) { /* what was read counts, whole or not */
		u->input_tokens += m->in + m->cw + m->cr;
		u->cache_write_tokens += m->cw;
		u->cache_read_tokens += m->cr;
		u->cache_write_1h_tokens += m->cw1h;
		u->output_tokens += m->out;
		json_object_put(m->body);
		if (m->tok)
			json_tokener_free(m->tok);
		free(m->line);
		free(m);
	}
	if (why)
		*why = w;
	return w ? AH_EINVALID : 0;
}
