/* One HTTP request as the FastCGI workers see it, and everything a handler uses
 * to answer it: path/query parameters, the JSON body, field validation that
 * collects 422 entries, and the response writers. All memory comes from the
 * request's arena. */
#ifndef AH_HTTP_HTTP_H
#define AH_HTTP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <json-c/json.h>

#include "core/arena.h"
#include "core/config.h"
#include "core/err.h"
#include "db/db.h"

struct FCGX_Request;

typedef struct ah_user {
	const char *id, *email, *plan, *created_at;
	long long quota_bytes;
	bool disabled;
} ah_user;

typedef struct ah_rate {
	bool counted;
	long long limit, remaining, reset;
} ah_rate;

#define AH_MAX_PARAMS 4

typedef struct ah_req {
	ah_arena *arena;
	struct FCGX_Request *fcgi;
	ah_db *db;
	const ah_config *cfg;

	const char *method;
	const char *path;         /* raw path below /api/v1, e.g. "/agents/x" */
	const char *query;        /* raw query string, "" when none */
	const char *request_id;
	const char *remote_addr;
	const char *content_type;
	long long content_length; /* -1 when absent */
	const char *params[AH_MAX_PARAMS]; /* decoded {name} path segments in order */
	size_t nparams;

	char *body;               /* read by the dispatcher unless the route streams */
	size_t body_len;

	ah_user *user;            /* set by authentication */
	const char *api_key_id;   /* the API key's record id, NULL for a JWT */
	/* Scoped routes (a scope in their row) get the record their first path parameter names
	 * loaded in the same query as the API key: scope is that record (the
	 * route's ah_scope says its type), or NULL when the caller has no such resource. */
	bool scope_loaded;
	void *scope;
	char *const *scope_extra; /* the scope's nextra cells after the record's, or NULL */
	/* The answer stands in for something that could not be read (a history
	 * blob): it is not to be kept for later requests. */
	bool partial;
	ah_rate rate;
	int64_t start_us;         /* its arrival at the worker (ah_mono_us) */

	/* response state */
	bool responded;
	int status;
	char *extra_headers;      /* "Name: value\r\n"... */
	json_object *errors;      /* pending 422 entries */
} ah_req;

/* ---- reading ---- */
const char *ah_param_env(ah_req *r, const char *name);          /* FastCGI param */
/* nginx's auth_request for the request in REQUEST_URI (its location sets the
 * AGENTHOST_AUTH_REQUEST parameter, which no client can): answered without a
 * body. The request it let through comes with AGENTHOST_AUTH_CHECKED. */
bool ah_auth_subrequest(ah_req *r);
bool ah_auth_checked(ah_req *r);
/* Decoded value of a query parameter, NULL when absent. */
const char *ah_query_get(ah_req *r, const char *name);

/* Parses the body as a JSON object. Malformed JSON or a non-object: writes the 422
 * itself and returns AH_EDONE. Keys not in `allowed` (NULL-terminated) are
 * recorded as extra_forbidden entries and left pending for the handler's
 * ah_verr_reply, so one answer lists every offending field. */
int ah_body_object(ah_req *r, json_object **out, const char *const *allowed);

/* Field readers: record a 422 entry (loc body.<name>) on a problem and return
 * AH_EINVALID; *present tells whether the key was there. */
enum { AH_F_REQUIRED = 1, AH_F_NULLABLE = 2 };
int ah_field_str(ah_req *r, json_object *o, const char *name, unsigned flags,
                 size_t minlen, size_t maxlen, const char **out, bool *present);
int ah_field_int(ah_req *r, json_object *o, const char *name, unsigned flags,
                 long long min, long long max, long long *out, bool *present);
int ah_field_bool(ah_req *r, json_object *o, const char *name, unsigned flags,
                  bool *out, bool *present);

/* Adds one 422 entry: loc = [where, field] (field may be NULL). */
void ah_verr(ah_req *r, const char *where, const char *field, const char *msg, const char *type);
/* If entries are pending, answers 422 with them and returns AH_EDONE; else 0. */
int ah_verr_reply(ah_req *r);

/* limit (1–100, default 20) and offset (≥ 0); writes the 422 itself → AH_EDONE. */
int ah_page(ah_req *r, long long *limit, long long *offset);

/* ---- multipart/form-data, streamed (multipart.c) ---- */
#define AH_MP_FILENAME_MAX 1024
typedef struct ah_mp_part {
	char name[128];                          /* form field name ("" when absent) */
	bool has_filename;                       /* a file part */
	bool filename_bad;                       /* too long or an undecodable filename* */
	char filename[AH_MP_FILENAME_MAX + 1];   /* raw bytes, may hold NUL (filename_len) */
	size_t filename_len;
	char content_type[256];                  /* "" when the part has none */
	bool content_type_long;
} ah_mp_part;
/* Reads up to n bytes; 0 at the end, < 0 on error. */
typedef ssize_t (*ah_mp_read_fn)(void *src, char *buf, size_t n);
/* Called for each part: begin (headers parsed), data (any number of times,
 * in order), end. A non-zero return stops the parse and is passed up. */
typedef struct ah_mp_sink {
	int (*begin)(void *ud, const ah_mp_part *p);
	int (*data)(void *ud, const char *buf, size_t n);
	int (*end)(void *ud);
} ah_mp_sink;
/* Parses a whole multipart body. 0; AH_EINVALID with a message in why when the
 * body is malformed (no boundary, truncated, a header too long); AH_EFAIL when
 * rd failed; or a sink's code. */
int ah_multipart_parse(ah_mp_read_fn rd, void *src, const char *boundary, const ah_mp_sink *s,
                       void *ud, char *why, size_t whycap);
/* The boundary of a "multipart/form-data; boundary=…" content type, or NULL. */
const char *ah_multipart_boundary(ah_arena *a, const char *content_type);

/* ---- writing ---- */
void ah_header(ah_req *r, const char *name, const char *value);
/* Writes status and body; takes ownership of body (may be NULL for no body). */
int ah_reply_json(ah_req *r, int status, json_object *body);
/* {"detail": detail} */
int ah_reply_error(ah_req *r, int status, const char *detail);
/* The same, but to nginx's auth_request, which passes only a 2xx, 401 or 403
 * on: 403 there, with the status and body the client is to get in
 * X-Agenthost-Status and X-Agenthost-Error (agenthost-locations.conf). */
int ah_reply_refusal(ah_req *r, int status, const char *detail);
int ah_reply_no_content(ah_req *r);
/* A bare JSON array plus X-Total-Count. Takes ownership of arr. */
int ah_reply_list(ah_req *r, json_object *arr, long long total);
/* The same from the array's text (a list answered from a kept copy). */
int ah_reply_list_body(ah_req *r, const char *body, size_t len, long long total);
/* The text every JSON answer is sent as (plain, "/" not escaped); o owns it. */
const char *ah_json_body(json_object *o, size_t *len);
/* A response written as it is made (server-sent events): the head now, with
 * no Content-Length, then the body in pieces, each flushed to nginx. A
 * client that went away makes them fail (AH_EFAIL); SIGPIPE is the
 * caller's to ignore. */
int ah_stream_begin(ah_req *r, int status, const char *ctype);
int ah_stream_write(ah_req *r, const void *p, size_t n);
/* Raw bytes with a content type. */
int ah_reply_raw(ah_req *r, int status, const char *content_type, const void *body, size_t len);

/* ---- JSON building helpers (values copied; NULL becomes JSON null) ---- */
void ah_json_str(json_object *o, const char *key, const char *val);
void ah_json_int(json_object *o, const char *key, long long val);
void ah_json_bool(json_object *o, const char *key, bool val);
/* DB DATETIME text → RFC 3339 string or null. */
void ah_json_time(ah_req *r, json_object *o, const char *key, const char *dbtime);
/* Keeps a parsed/created root object alive until the request ends. */
json_object *ah_json_own(ah_req *r, json_object *o);

#endif
