/* The provider's own token counts in its answers, read as the answer streams
 * through the gateway (Anthropic's Messages API):
 *   - a JSON body: top-level "usage" {"input_tokens","output_tokens",
 *     "cache_creation_input_tokens","cache_read_input_tokens"};
 *   - server-sent events: "message_start" carries message.usage, and each
 *     "message_delta" carries usage whose counts are cumulative (the last one
 *     wins).
 * Input counts all three input figures (cache writes and reads are input the
 * provider processed). Caps keep a hostile or broken answer from costing more
 * than a bounded amount of memory: such an answer simply counts nothing. */
#include "runner/gateway.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define JSON_CAP (16 << 20) /* body bytes parsed at most */
#define LINE_CAP (1 << 20)  /* one SSE line */

struct ah_gw_meter {
	bool sse, broken;
	json_tokener *tok;  /* JSON body */
	json_object *body;
	size_t fed;
	char *line;         /* SSE: the line being read */
	size_t line_len;
	long long in, out;
	bool seen;
	char error[200];    /* "TYPE: MESSAGE" of an error the answer carried */
};

ah_gw_meter *ah_gw_meter_new(const char *content_type)
{
	bool sse = content_type && strncasecmp(content_type, "text/event-stream", 17) == 0;
	bool json = content_type && strncasecmp(content_type, "application/json", 16) == 0;
	if (!sse && !json)
		return NULL;
	ah_gw_meter *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->sse = sse;
	m->tok = sse ? NULL : json_tokener_new();
	m->line = sse ? malloc(LINE_CAP) : NULL;
	if (sse ? !m->line : !m->tok) {
		free(m);
		return NULL;
	}
	return m;
}

static long long field(json_object *o, const char *key, bool *present)
{
	json_object *v;
	if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
		return 0;
	long long n = json_object_get_int64(v);
	*present = true;
	return n > 0 ? n : 0;
}

/* A usage object: inputs replace m->in when any is present, likewise output. */
static void take_usage(ah_gw_meter *m, json_object *usage)
{
	bool has_in = false, has_out = false;
	long long in = field(usage, "input_tokens", &has_in) +
	               field(usage, "cache_creation_input_tokens", &has_in) +
	               field(usage, "cache_read_input_tokens", &has_in);
	long long out = field(usage, "output_tokens", &has_out);
	if (has_in)
		m->in = in;
	if (has_out)
		m->out = out;
	m->seen = m->seen || has_in || has_out;
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

static void sse_event(ah_gw_meter *m, const char *data, size_t len)
{
	json_object *ev = json_tokener_parse(data);
	(void)len;
	const char *type = json_object_get_string(member(ev, "type"));
	if (type && strcmp(type, "message_start") == 0)
		take_usage(m, member(member(ev, "message"), "usage"));
	else if (type && strcmp(type, "message_delta") == 0)
		take_usage(m, member(ev, "usage"));
	else if (type && strcmp(type, "error") == 0) /* e.g. overloaded mid-stream */
		take_error(m, member(ev, "error"));
	json_object_put(ev);
}

static void sse_line(ah_gw_meter *m)
{
	char *l = m->line;
	size_t n = m->line_len;
	if (n > 0 && l[n - 1] == '\r')
		n--;
	l[n] = '\0';
	if (n > 5 && strncmp(l, "data:", 5) == 0)
		sse_event(m, l + 5, n - 5);
}

static void sse_feed(ah_gw_meter *m, const char *data, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (data[i] == '\n') {
			if (m->line_len < LINE_CAP)
				sse_line(m);
			m->line_len = 0; /* an over-long line is dropped whole */
		} else if (m->line_len < LINE_CAP) {
			m->line[m->line_len++] = data[i];
		}
	}
}

static void json_feed(ah_gw_meter *m, const char *data, size_t len)
{
	if (m->broken || m->body || len == 0)
		return;
	m->fed += len;
	if (m->fed > JSON_CAP) {
		m->broken = true;
		return;
	}
	m->body = json_tokener_parse_ex(m->tok, data, (int)len);
	if (!m->body && json_tokener_get_error(m->tok) != json_tokener_continue)
		m->broken = true;
}

void ah_gw_meter_feed(ah_gw_meter *m, const char *data, size_t len)
{
	if (!m)
		return;
	if (m->sse)
		sse_feed(m, data, len);
	else
		json_feed(m, data, len);
}

void ah_gw_meter_finish(ah_gw_meter *m, ah_gateway_usage *u)
{
	if (!m)
		return;
	if (!m->sse && m->body) {
		take_usage(m, member(m->body, "usage"));
		take_error(m, member(m->body, "error"));
	}
	if (m->error[0])
		snprintf(u->error, sizeof u->error, "%s", m->error);
	if (m->seen) {
		u->input_tokens += m->in;
		u->output_tokens += m->out;
	}
	json_object_put(m->body);
	if (m->tok)
		json_tokener_free(m->tok);
	free(m->line);
	free(m);
}
