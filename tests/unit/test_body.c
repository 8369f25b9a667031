/* Unit test of lib/http: the JSON body parser and field validators (the
 * contract's 422 shape), query parameters and paging, percent-decoding, and the
 * response writer (status line, standard headers, header-injection guard).
 * Responses go to an in-memory FastCGI stream and are parsed back. TAP. */
#include "http/http.h"
#include "http/internal.h"

#include <fcgiapp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

/* ---- a request whose response lands in memory ---- */

static unsigned char outbuf[1 << 20];

static void full(FCGX_Stream *s, int doClose)
{
	(void)doClose;
	s->isClosed = 1; /* the buffer is sized so that this never happens */
}

struct fake {
	ah_req r;
	FCGX_Request fcgi;
	FCGX_Stream out;
	char *env[8];
};

static void fake_init(struct fake *f, const char *body, size_t len, const char *query)
{
	memset(f, 0, sizeof(*f));
	memset(outbuf, 0, sizeof(outbuf));
	f->out.rdNext = f->out.wrNext = f->out.stopUnget = outbuf;
	f->out.stop = outbuf + sizeof(outbuf);
	f->out.emptyBuffProc = full;
	f->fcgi.out = &f->out;
	f->fcgi.envp = f->env;
	f->r.arena = ah_arena_new();
	f->r.fcgi = &f->fcgi;
	f->r.request_id = "req-test-1";
	f->r.query = query ? query : "";
	if (body) {
		f->r.body = ah_alloc(f->r.arena, len + 1);
		memcpy(f->r.body, body, len);
		f->r.body_len = len;
	}
}

static size_t out_len(struct fake *f)
{
	return (size_t)(f->out.wrNext - outbuf);
}

/* The JSON body of the written response, or NULL. */
static json_object *out_json(struct fake *f)
{
	char *sep = strstr((char *)outbuf, "\r\n\r\n");
	return sep ? ah_json_own(&f->r, json_tokener_parse(sep + 4)) : NULL;
}

static int out_status(void)
{
	int s = 0;
	return sscanf((char *)outbuf, "Status: %d", &s) == 1 ? s : 0;
}

static int out_has_header(const char *line)
{
	char *end = strstr((char *)outbuf, "\r\n\r\n");
	char *p = strstr((char *)outbuf, line);
	return p && end && p < end;
}

static void fake_done(struct fake *f)
{
	ah_arena_destroy(f->r.arena);
}

/* The errors the request collected (pending or written), as "where.field:type;…". */
static const char *errors_str(struct fake *f)
{
	json_object *arr = f->r.errors;
	if (!arr) {
		json_object *o = out_json(f), *d;
		if (o && json_object_object_get_ex(o, "detail", &d) && json_object_is_type(d, json_type_array))
			arr = d;
	}
	if (!arr)
		return "";
	char *s = "";
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		json_object *e = json_object_array_get_idx(arr, i), *loc, *type, *msg;
		if (!json_object_object_get_ex(e, "loc", &loc) || !json_object_object_get_ex(e, "type", &type) ||
		    !json_object_object_get_ex(e, "msg", &msg) || json_object_get_string_len(msg) == 0)
			return "malformed entry";
		const char *where = json_object_get_string(json_object_array_get_idx(loc, 0));
		const char *field = json_object_array_length(loc) > 1
		                    ? json_object_get_string(json_object_array_get_idx(loc, 1)) : NULL;
		s = ah_sprintf(f->r.arena, "%s%s%s%s%s:%s", s, *s ? ";" : "", where, field ? "." : "",
		               field ? field : "", json_object_get_string(type));
	}
	return s;
}

/* ---- ah_body_object ---- */

static const char *const FIELDS[] = {"name", "count", NULL};

struct body_case {
	const char *desc;
	const char *body;
	size_t len;           /* 0: strlen(body) */
	int rc;               /* 0 or AH_EDONE */
	const char *errors;   /* expected errors_str */
};

static const struct body_case body_cases[] = {
	{"object with allowed keys", "{\"name\":\"x\",\"count\":1}", 0, 0, ""},
	{"empty object", "{}", 0, 0, ""},
	{"surrounding whitespace", " \t\r\n{}\n ", 0, 0, ""},
	{"no body", NULL, 0, AH_EDONE, "body:missing"},
	{"unterminated object", "{", 0, AH_EDONE, "body:json_invalid"},
	{"unterminated string", "{\"name\":\"x", 0, AH_EDONE, "body:json_invalid"},
	{"single quotes", "{'name':'x'}", 0, AH_EDONE, "body:json_invalid"},
	{"trailing comma", "{\"name\":\"x\",}", 0, AH_EDONE, "body:json_invalid"},
	{"trailing garbage", "{} x", 0, AH_EDONE, "body:json_invalid"},
	{"two values", "{}{}", 0, AH_EDONE, "body:json_invalid"},
	{"trailing NUL byte", "{}\0", 3, AH_EDONE, "body:json_invalid"},
	{"NUL byte inside", "{\0}", 3, AH_EDONE, "body:json_invalid"},
	{"comment", "/* c */ {}", 0, AH_EDONE, "body:json_invalid"},
	{"array at top level", "[]", 0, AH_EDONE, "body:model_type"},
	{"string at top level", "\"x\"", 0, AH_EDONE, "body:model_type"},
	{"nesting at the depth limit", "{\"name\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}", 0, 0, ""},
	{"nesting past the depth limit", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", 0,
	 AH_EDONE, "body:json_invalid"},
	/* Unknown keys are left pending (rc 0, nothing answered yet) so the handler's
	 * own field checks join them in one 422. */
	{"unknown key pending", "{\"bogus\":1}", 0, 0, "body.bogus:extra_forbidden"},
	{"every unknown key pending", "{\"a\":1,\"name\":\"x\",\"b\":2}", 0, 0,
	 "body.a:extra_forbidden;body.b:extra_forbidden"},
	{"key names are case-sensitive", "{\"Name\":\"x\"}", 0, 0, "body.Name:extra_forbidden"},
	{"raw invalid byte", "{\"name\":\"\xff\"}", 0, AH_EDONE, "body:json_invalid"},
	{"overlong encoding", "{\"name\":\"\xc0\xaf\"}", 0, AH_EDONE, "body:json_invalid"},
	{"encoded surrogate", "{\"name\":\"\xed\xa0\x80\"}", 0, AH_EDONE, "body:json_invalid"},
	{"past U+10FFFF", "{\"name\":\"\xf4\x90\x80\x80\"}", 0, AH_EDONE, "body:json_invalid"},
	{"truncated sequence", "{\"name\":\"\xe2\x82\"}", 0, AH_EDONE, "body:json_invalid"},
	{"invalid byte in a key", "{\"\xff\":1}", 0, AH_EDONE, "body:json_invalid"},
	{"valid multibyte text", "{\"name\":\"caf\xc3\xa9 \xf0\x9f\x98\x80\"}", 0, 0, ""},
	{"escaped astral character", "{\"name\":\"\\ud83d\\ude00\"}", 0, 0, ""},
};

static void test_body_object(void)
{
	for (size_t i = 0; i < sizeof(body_cases) / sizeof(body_cases[0]); i++) {
		const struct body_case *c = &body_cases[i];
		struct fake f;
		fake_init(&f, c->body, c->body ? (c->len ? c->len : strlen(c->body)) : 0, NULL);
		json_object *o = NULL;
		int rc = ah_body_object(&f.r, &o, FIELDS);
		const char *errs = errors_str(&f);
		int good = rc == c->rc && strcmp(errs, c->errors) == 0;
		if (rc == 0)
			good = good && o && json_object_is_type(o, json_type_object) && !f.r.responded;
		else
			good = good && f.r.responded && out_status() == 422 &&
			       out_has_header("Content-Type: application/json\r\n");
		ok(good, "body_object: %s", c->desc);
		if (!good)
			printf("# rc %d, errors \"%s\"\n", rc, errs);
		fake_done(&f);
	}
	/* 10000 levels: refused, and no stack overflow */
	struct fake f;
	char *deep = malloc(20001);
	memset(deep, '[', 10000);
	memset(deep + 10000, ']', 10000);
	deep[20000] = '\0';
	fake_init(&f, deep, 20000, NULL);
	json_object *o;
	ok(ah_body_object(&f.r, &o, FIELDS) == AH_EDONE && strcmp(errors_str(&f), "body:json_invalid") == 0,
	   "body_object: 10000 levels of nesting");
	fake_done(&f);
	free(deep);
}

/* ---- field readers ---- */

enum kind { STR, INT, BOOL };

struct field_case {
	const char *desc;
	enum kind kind;
	const char *json;
	unsigned flags;
	long long min, max;   /* lengths for STR, bounds for INT */
	int rc;
	const char *want;     /* STR: the value ("<null>" for NULL); INT/BOOL: printed value */
	int present;
	const char *errors;
};

static const struct field_case field_cases[] = {
	{"string", STR, "{\"f\":\"abc\"}", 0, 1, 3, 0, "abc", 1, ""},
	{"string at max length", STR, "{\"f\":\"abc\"}", 0, 0, 3, 0, "abc", 1, ""},
	{"string too long", STR, "{\"f\":\"abcd\"}", 0, 0, 3, AH_EINVALID, "<null>", 1, "body.f:string_too_long"},
	{"string too short", STR, "{\"f\":\"\"}", 0, 1, 3, AH_EINVALID, "<null>", 1, "body.f:string_too_short"},
	{"empty string allowed", STR, "{\"f\":\"\"}", 0, 0, 3, 0, "", 1, ""},
	{"length counts characters", STR, "{\"f\":\"\xc3\xa9\xc3\xa9\xc3\xa9\"}", 0, 1, 3, 0,
	 "\xc3\xa9\xc3\xa9\xc3\xa9", 1, ""},
	{"four characters of two bytes", STR, "{\"f\":\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}", 0, 1, 3,
	 AH_EINVALID, "<null>", 1, "body.f:string_too_long"},
	{"NUL inside", STR, "{\"f\":\"a\\u0000b\"}", 0, 0, 10, AH_EINVALID, "<null>", 1,
	 "body.f:string_pattern_mismatch"},
	{"number for string", STR, "{\"f\":5}", 0, 0, 10, AH_EINVALID, "<null>", 1, "body.f:string_type"},
	{"bool for string", STR, "{\"f\":true}", 0, 0, 10, AH_EINVALID, "<null>", 1, "body.f:string_type"},
	{"array for string", STR, "{\"f\":[\"a\"]}", 0, 0, 10, AH_EINVALID, "<null>", 1, "body.f:string_type"},
	{"object for string", STR, "{\"f\":{}}", 0, 0, 10, AH_EINVALID, "<null>", 1, "body.f:string_type"},
	{"null where nullable", STR, "{\"f\":null}", AH_F_NULLABLE, 0, 10, 0, "<null>", 1, ""},
	{"null where not nullable", STR, "{\"f\":null}", 0, 0, 10, AH_EINVALID, "<null>", 1,
	 "body.f:null_forbidden"},
	{"missing, required", STR, "{}", AH_F_REQUIRED, 0, 10, AH_EINVALID, "<null>", 0, "body.f:missing"},
	{"missing, optional", STR, "{}", 0, 0, 10, 0, "<null>", 0, ""},
	{"int", INT, "{\"f\":5}", 0, 1, 600, 0, "5", 1, ""},
	{"int at min", INT, "{\"f\":1}", 0, 1, 600, 0, "1", 1, ""},
	{"int at max", INT, "{\"f\":600}", 0, 1, 600, 0, "600", 1, ""},
	{"int below min", INT, "{\"f\":0}", 0, 1, 600, AH_EINVALID, "-", 1, "body.f:greater_than_equal"},
	{"int above max", INT, "{\"f\":601}", 0, 1, 600, AH_EINVALID, "-", 1, "body.f:less_than_equal"},
	{"negative", INT, "{\"f\":-5}", 0, 1, 600, AH_EINVALID, "-", 1, "body.f:greater_than_equal"},
	{"int64 max", INT, "{\"f\":9223372036854775807}", 0, 1, 600, AH_EINVALID, "-", 1,
	 "body.f:less_than_equal"},
	{"past int64", INT, "{\"f\":99999999999999999999999}", 0, 1, 600, AH_EINVALID, "-", 1, NULL},
	{"string for int", INT, "{\"f\":\"5\"}", 0, 1, 600, AH_EINVALID, "-", 1, "body.f:int_type"},
	{"float for int", INT, "{\"f\":5.5}", 0, 1, 600, AH_EINVALID, "-", 1, "body.f:int_type"},
	{"whole float for int", INT, "{\"f\":5.0}", 0, 1, 600, AH_EINVALID, "-", 1, "body.f:int_type"},
	{"bool for int", INT, "{\"f\":true}", 0, 1, 600, AH_EINVALID, "-", 1, "body.f:int_type"},
	{"null int", INT, "{\"f\":null}", 0, 1, 600, AH_EINVALID, "-", 1, "body.f:null_forbidden"},
	{"missing int", INT, "{}", 0, 1, 600, 0, "-", 0, ""},
	{"bool true", BOOL, "{\"f\":true}", 0, 0, 0, 0, "1", 1, ""},
	{"bool false", BOOL, "{\"f\":false}", 0, 0, 0, 0, "0", 1, ""},
	{"number for bool", BOOL, "{\"f\":1}", 0, 0, 0, AH_EINVALID, "-", 1, "body.f:bool_type"},
	{"string for bool", BOOL, "{\"f\":\"true\"}", 0, 0, 0, AH_EINVALID, "-", 1, "body.f:bool_type"},
	{"missing required bool", BOOL, "{}", AH_F_REQUIRED, 0, 0, AH_EINVALID, "-", 0, "body.f:missing"},
};

static void test_fields(void)
{
	for (size_t i = 0; i < sizeof(field_cases) / sizeof(field_cases[0]); i++) {
		const struct field_case *c = &field_cases[i];
		struct fake f;
		fake_init(&f, NULL, 0, NULL);
		json_object *o = ah_json_own(&f.r, json_tokener_parse(c->json));
		bool present = !c->present;
		int rc;
		const char *got = "-";
		if (c->kind == STR) {
			const char *s = "unset";
			rc = ah_field_str(&f.r, o, "f", c->flags, (size_t)c->min, (size_t)c->max, &s, &present);
			got = s ? s : "<null>";
		} else if (c->kind == INT) {
			long long n = -999;
			rc = ah_field_int(&f.r, o, "f", c->flags, c->min, c->max, &n, &present);
			if (rc == 0 && present)
				got = ah_sprintf(f.r.arena, "%lld", n);
		} else {
			bool b = false;
			rc = ah_field_bool(&f.r, o, "f", c->flags, &b, &present);
			if (rc == 0 && present)
				got = b ? "1" : "0";
		}
		const char *errs = errors_str(&f);
		int good = o && rc == c->rc && strcmp(got, c->want) == 0 && present == (c->present != 0) &&
		           !f.r.responded &&
		           (c->errors ? strcmp(errs, c->errors) == 0 : (*errs && !strchr(errs, ';')));
		ok(good, "field: %s", c->desc);
		if (!good)
			printf("# rc %d, value \"%s\", present %d, errors \"%s\"\n", rc, got, present, errs);
		fake_done(&f);
	}
	/* the readers collect; ah_verr_reply answers once with every entry */
	struct fake f;
	fake_init(&f, NULL, 0, NULL);
	json_object *o = ah_json_own(&f.r, json_tokener_parse("{\"a\":1,\"b\":\"x\"}"));
	const char *s;
	long long n;
	ah_field_str(&f.r, o, "a", 0, 0, 5, &s, NULL);
	ah_field_int(&f.r, o, "b", 0, 0, 5, &n, NULL);
	ah_field_str(&f.r, o, "c", AH_F_REQUIRED, 0, 5, &s, NULL);
	ok(!f.r.responded && ah_verr_reply(&f.r) == AH_EDONE && out_status() == 422 &&
	   strcmp(errors_str(&f), "body.a:string_type;body.b:int_type;body.c:missing") == 0,
	   "verr_reply answers 422 with one entry per field");
	fake_done(&f);
	fake_init(&f, NULL, 0, NULL);
	ok(ah_verr_reply(&f.r) == 0 && !f.r.responded && out_len(&f) == 0, "verr_reply without errors writes nothing");
	fake_done(&f);
}

/* ---- query, paging, decoding ---- */

static const struct {
	const char *query, *name, *want; /* want NULL: absent */
} query_cases[] = {
	{"a=1&b=2", "b", "2"},
	{"a=1&b=2", "a", "1"},
	{"a=1&b=2", "c", NULL},
	{"", "a", NULL},
	{"limit=%31%30", "limit", "10"},
	{"q=a+b%20c", "q", "a b c"},
	{"flag", "flag", ""},
	{"flag&x=1", "flag", ""},
	{"a=", "a", ""},
	{"a=1&a=2", "a", "1"},
	{"%61=decoded-key", "a", "decoded-key"},
	{"ab=1", "a", NULL},
	{"a=x=y", "a", "x=y"},
	{"a=%00", "a", "\x01"},      /* a smuggled NUL is reported as an impossible value */
	{"a=1%002", "a", "\x01"},
	{"a=%zz", "a", "%zz"},
	{"&&a=1&&", "a", "1"},
};

static void test_query(void)
{
	for (size_t i = 0; i < sizeof(query_cases) / sizeof(query_cases[0]); i++) {
		struct fake f;
		fake_init(&f, NULL, 0, query_cases[i].query);
		const char *got = ah_query_get(&f.r, query_cases[i].name);
		const char *want = query_cases[i].want;
		ok(want ? (got && strcmp(got, want) == 0) : got == NULL, "query_get(\"%s\", %s)",
		   query_cases[i].query, query_cases[i].name);
		fake_done(&f);
	}
}

static const struct {
	const char *query;
	int rc;
	long long limit, offset;
	const char *errors;
} page_cases[] = {
	{"", 0, 20, 0, ""},
	{"limit=1", 0, 1, 0, ""},
	{"limit=100&offset=5", 0, 100, 5, ""},
	{"offset=1000000", 0, 20, 1000000, ""},
	{"limit=0", AH_EDONE, 0, 0, "query.limit:int_range"},
	{"limit=101", AH_EDONE, 0, 0, "query.limit:int_range"},
	{"limit=-1", AH_EDONE, 0, 0, "query.limit:int_range"},
	{"limit=abc", AH_EDONE, 0, 0, "query.limit:int_range"},
	{"limit=", AH_EDONE, 0, 0, "query.limit:int_range"},
	{"limit=1.5", AH_EDONE, 0, 0, "query.limit:int_range"},
	{"limit=%00", AH_EDONE, 0, 0, "query.limit:int_range"},
	{"limit=99999999999999999999", AH_EDONE, 0, 0, "query.limit:int_range"},
	{"offset=-1", AH_EDONE, 0, 0, "query.offset:int_range"},
	{"limit=0&offset=x", AH_EDONE, 0, 0, "query.limit:int_range;query.offset:int_range"},
};

static void test_page(void)
{
	for (size_t i = 0; i < sizeof(page_cases) / sizeof(page_cases[0]); i++) {
		struct fake f;
		fake_init(&f, NULL, 0, page_cases[i].query);
		long long limit = -1, offset = -1;
		int rc = ah_page(&f.r, &limit, &offset);
		const char *errs = errors_str(&f);
		int good = rc == page_cases[i].rc && strcmp(errs, page_cases[i].errors) == 0;
		if (rc == 0)
			good = good && limit == page_cases[i].limit && offset == page_cases[i].offset && !f.r.responded;
		else
			good = good && out_status() == 422;
		ok(good, "page(\"%s\")", page_cases[i].query);
		fake_done(&f);
	}
}

static const struct {
	const char *in;
	int plus;
	const char *want;
	size_t wantlen;
} decode_cases[] = {
	{"abc", 0, "abc", 3},
	{"%41%62%63", 0, "Abc", 3},
	{"%2f%2F", 0, "//", 2},
	{"a+b", 0, "a+b", 3},
	{"a+b", 1, "a b", 3},
	{"%", 0, "%", 1},
	{"%4", 0, "%4", 2},
	{"%4g", 0, "%4g", 3},
	{"a%00b", 0, "a\0b", 3},
	{"%e2%82%ac", 0, "\xe2\x82\xac", 3},
};

static void test_decode(void)
{
	ah_arena *a = ah_arena_new();
	for (size_t i = 0; i < sizeof(decode_cases) / sizeof(decode_cases[0]); i++) {
		size_t len = 999;
		char *got = ah_url_decode(a, decode_cases[i].in, strlen(decode_cases[i].in),
		                          decode_cases[i].plus != 0, &len);
		ok(len == decode_cases[i].wantlen && memcmp(got, decode_cases[i].want, len) == 0 && got[len] == '\0',
		   "url_decode(\"%s\"%s)", decode_cases[i].in, decode_cases[i].plus ? ", plus" : "");
	}
	ah_arena_destroy(a);
}

/* ---- response writer ---- */

static void test_response(void)
{
	struct fake f;
	fake_init(&f, NULL, 0, NULL);
	ah_reply_list(&f.r, json_object_new_array(), 7);
	ok(out_status() == 200 && strncmp((char *)outbuf, "Status: 200 OK\r\n", 16) == 0,
	   "reply_list: Status: 200 OK");
	ok(out_has_header("X-Total-Count: 7\r\n") && out_has_header("X-Request-Id: req-test-1\r\n") &&
	   out_has_header("Content-Type: application/json\r\nContent-Length: 2\r\n"),
	   "reply_list: X-Total-Count, X-Request-Id, Content-Type and -Length");
	ok(strcmp(strstr((char *)outbuf, "\r\n\r\n") + 4, "[]") == 0, "reply_list: bare array body");
	ok(!out_has_header("X-RateLimit-Limit"), "no rate-limit headers when the request was not counted");
	ok(out_has_header("\r\nX-Content-Type-Options: nosniff\r\n"), "reply_list: nosniff");
	int second = ah_reply_error(&f.r, 500, "again");
	ok(second == AH_EDONE && strstr((char *)outbuf, "again") == NULL, "a second response is never written");
	fake_done(&f);

	fake_init(&f, NULL, 0, NULL);
	f.r.rate = (ah_rate){.counted = true, .limit = 100, .remaining = 0, .reset = 1795306560};
	ah_header(&f.r, "Retry-After", "42");
	ah_header(&f.r, "X-Evil", "a\r\nSet-Cookie: x=1");
	ah_header(&f.r, "X-Evil2", "a\nb");
	ah_reply_error(&f.r, 429, "Rate limit exceeded. Try again in 42 seconds.");
	ok(out_status() == 429 && out_has_header("X-RateLimit-Limit: 100\r\n") &&
	   out_has_header("X-RateLimit-Remaining: 0\r\n") && out_has_header("X-RateLimit-Reset: 1795306560\r\n"),
	   "reply_error: the X-RateLimit-* headers of a counted request");
	ok(out_has_header("Retry-After: 42\r\n"), "extra headers are written");
	ok(out_has_header("\r\nX-Content-Type-Options: nosniff\r\n"), "reply_error: nosniff");
	ok(!strstr((char *)outbuf, "Set-Cookie") && !strstr((char *)outbuf, "X-Evil"),
	   "header values with CR or LF are dropped");
	json_object *o = out_json(&f), *d;
	ok(o && json_object_object_get_ex(o, "detail", &d) &&
	   strcmp(json_object_get_string(d), "Rate limit exceeded. Try again in 42 seconds.") == 0,
	   "reply_error: {\"detail\": message}");
	fake_done(&f);

	fake_init(&f, NULL, 0, NULL);
	ah_reply_no_content(&f.r);
	/* "\r\n" first: X-Content-Type-Options is not a Content-Type. */
	ok(out_status() == 204 && !out_has_header("\r\nContent-Type:") &&
	   strcmp(strstr((char *)outbuf, "\r\n\r\n"), "\r\n\r\n") == 0, "reply_no_content: 204 without a body");
	ok(out_has_header("\r\nX-Content-Type-Options: nosniff\r\n"), "reply_no_content: nosniff");
	fake_done(&f);

	fake_init(&f, NULL, 0, NULL);
	json_object *b = json_object_new_object();
	ah_json_str(b, "path", "a/b");
	ah_json_str(b, "none", NULL);
	ah_json_time(&f.r, b, "at", "2026-11-21 23:59:59.123");
	ah_json_time(&f.r, b, "never", NULL);
	ah_reply_json(&f.r, 201, b);
	ok(out_status() == 201 && strcmp(strstr((char *)outbuf, "\r\n\r\n") + 4,
	   "{\"path\":\"a/b\",\"none\":null,\"at\":\"2026-11-21T23:59:59.123Z\",\"never\":null}") == 0,
	   "reply_json: compact, unescaped slashes, nulls, RFC 3339 times");
	fake_done(&f);
}

int main(void)
{
	test_body_object();
	test_fields();
	test_query();
	test_page();
	test_decode();
	test_response();
	printf("1..%d\n", ntest);
	return nfail != 0;
}
