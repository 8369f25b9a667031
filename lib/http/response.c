/* Writing a response: status, the headers every response carries (request id,
 * rate-limit state, nosniff), extra headers, body. */
#include "http/http.h"
#include "core/log.h"
#include "core/util.h"

#include <fcgiapp.h>
#include <stdio.h>
#include <string.h>

static const char *reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 415: return "Unsupported Media Type";
	case 422: return "Unprocessable Content";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 507: return "Insufficient Storage";
	default:  return "Unknown";
	}
}

void ah_header(ah_req *r, const char *name, const char *value)
{
	/* Header injection guard: values come partly from clients (e.g. filenames). */
	if (strpbrk(value, "\r\n"))
		return;
	r->extra_headers = ah_sprintf(r->arena, "%s%s: %s\r\n",
	                              r->extra_headers ? r->extra_headers : "", name, value);
}

static void write_head(ah_req *r, int status, const char *ctype, size_t len)
{
	/* fcgi's own FCGX_FPrintF lacks some conversions (%zu); format here. */
	char head[1024];
	int n = snprintf(head, sizeof(head), "Status: %d %s\r\n", status, reason(status));
	if (ctype && len == (size_t)-1) /* a stream: its length is not known */
		n += snprintf(head + n, sizeof(head) - (size_t)n, "Content-Type: %s\r\n", ctype);
	else if (ctype)
		n += snprintf(head + n, sizeof(head) - (size_t)n,
		              "Content-Type: %s\r\nContent-Length: %zu\r\n", ctype, len);
	/* A browser never guesses a type other than the one given: a JSON error
	 * echoing a client's text is not run as HTML or script. nginx's own
	 * answers carry it from its locations (nginx/snippets/ratelimit.conf). */
	n += snprintf(head + n, sizeof(head) - (size_t)n, "X-Content-Type-Options: nosniff\r\n");
	if (r->request_id)
		n += snprintf(head + n, sizeof(head) - (size_t)n, "X-Request-Id: %s\r\n", r->request_id);
	if (r->rate.counted)
		n += snprintf(head + n, sizeof(head) - (size_t)n,
		              "X-RateLimit-Limit: %lld\r\nX-RateLimit-Remaining: %lld\r\n"
		              "X-RateLimit-Reset: %lld\r\n",
		              r->rate.limit, r->rate.remaining, r->rate.reset);
	FCGX_PutStr(head, n < (int)sizeof(head) ? n : (int)sizeof(head) - 1, r->fcgi->out);
	if (r->extra_headers)
		FCGX_PutS(r->extra_headers, r->fcgi->out);
	FCGX_PutS("\r\n", r->fcgi->out);
}

int ah_reply_raw(ah_req *r, int status, const char *ctype, const void *body, size_t len)
{
	if (r->responded) {
		ah_log_error("second response attempted (status %d)", status);
		return AH_EDONE;
	}
	r->responded = true;
	r->status = status;
	write_head(r, status, ctype, len);
	if (len)
		FCGX_PutStr(body, (int)len, r->fcgi->out);
	return AH_EDONE;
}

int ah_stream_begin(ah_req *r, int status, const char *ctype)
{
	if (r->responded) {
		ah_log_error("second response attempted (status %d)", status);
		return AH_EDONE;
	}
	r->responded = true;
	r->status = status;
	write_head(r, status, ctype, (size_t)-1);
	return FCGX_FFlush(r->fcgi->out) < 0 ? AH_EFAIL : 0;
}

int ah_stream_write(ah_req *r, const void *p, size_t n)
{
	if (n && FCGX_PutStr(p, (int)n, r->fcgi->out) < 0)
		return AH_EFAIL;
	return FCGX_FFlush(r->fcgi->out) < 0 ? AH_EFAIL : 0;
}

const char *ah_json_body(json_object *o, size_t *len)
{
	return json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE,
	                                         len);
}

int ah_reply_json(ah_req *r, int status, json_object *body)
{
	if (!body)
		return ah_reply_raw(r, status, NULL, NULL, 0);
	size_t len;
	const char *s = ah_json_body(body, &len);
	int rc = ah_reply_raw(r, status, "application/json", s, len);
	json_object_put(body);
	return rc;
}

/* Retry-After for a database that is away: MariaDB restarts in seconds. */
#define DB_AWAY_RETRY_S "5"

int ah_reply_error(ah_req *r, int status, const char *detail)
{
	/* Whatever failed, it failed because the database is away: the client
	 * should retry, and the operator's log already says why. */
	if (status == 500 && r->db && ah_db_unavailable(r->db)) {
		status = 503;
		detail = "The database is unavailable; retry shortly";
		ah_header(r, "Retry-After", DB_AWAY_RETRY_S);
	} else if (status == 500 && r->db && ah_db_deadlocked(r->db)) {
		/* A concurrent change (on a cluster: on another node) won: nothing
		 * of this request was kept, and the same request will do. */
		status = 503;
		detail = "A concurrent change conflicted with this request; retry it";
		ah_header(r, "Retry-After", "1");
	}
	json_object *b = json_object_new_object();
	ah_json_str(b, "detail", detail);
	return ah_reply_json(r, status, b);
}

int ah_reply_refusal(ah_req *r, int status, const char *detail)
{
	if (ah_auth_subrequest(r)) {
		json_object *b = json_object_new_object();
		size_t n;
		ah_json_str(b, "detail", detail);
		ah_header(r, "X-Agenthost-Status", ah_sprintf(r->arena, "%d", status));
		ah_header(r, "X-Agenthost-Error", ah_strdup(r->arena, ah_json_body(b, &n)));
		json_object_put(b);
		status = 403;
	}
	return ah_reply_error(r, status, detail);
}

int ah_reply_no_content(ah_req *r)
{
	return ah_reply_raw(r, 204, NULL, NULL, 0);
}

int ah_reply_list(ah_req *r, json_object *arr, long long total)
{
	size_t len;
	const char *s = ah_json_body(arr, &len);
	int rc = ah_reply_list_body(r, s, len, total);
	json_object_put(arr);
	return rc;
}

int ah_reply_list_body(ah_req *r, const char *body, size_t len, long long total)
{
	char n[32];
	snprintf(n, sizeof(n), "%lld", total);
	ah_header(r, "X-Total-Count", n);
	return ah_reply_raw(r, 200, "application/json", body, len);
}

void ah_json_str(json_object *o, const char *key, const char *val)
{
	json_object_object_add(o, key, val ? json_object_new_string(val) : NULL);
}

void ah_json_int(json_object *o, const char *key, long long val)
{
	json_object_object_add(o, key, json_object_new_int64(val));
}

void ah_json_bool(json_object *o, const char *key, bool val)
{
	json_object_object_add(o, key, json_object_new_boolean(val));
}

void ah_json_time(ah_req *r, json_object *o, const char *key, const char *dbtime)
{
	ah_json_str(o, key, ah_db_time_to_rfc3339(r->arena, dbtime));
}
