/* One request from accept to response: parse → route → authenticate →
 * rate-limit → read body → handler. Every exit path writes exactly one response
 * in the contract's shape. */
#include "api/dispatch.h"
#include "api/metrics.h"
#include "auth/auth.h"
#include "core/log.h"
#include "core/util.h"
#include "http/router.h"
#include "ratelimit/ratelimit.h"

#include <assert.h>
#include <fcgiapp.h>
#include <stdio.h>
#include <string.h>

#define API_PREFIX "/api/v1"

/* Splits REQUEST_URI into the path below /api/v1 and the query string. */
static int split_uri(ah_req *r)
{
	const char *uri = ah_param_env(r, "REQUEST_URI");
	if (!uri || strncmp(uri, API_PREFIX, strlen(API_PREFIX)) != 0)
		return AH_ENOTFOUND;
	uri += strlen(API_PREFIX);
	const char *q = strchr(uri, '?');
	r->path = q ? ah_strndup(r->arena, uri, (size_t)(q - uri)) : uri;
	r->query = q ? q + 1 : "";
	if (r->path[0] == '\0')
		r->path = "/";
	return r->path[0] == '/' ? 0 : AH_ENOTFOUND;
}

static void init_req(ah_req *r)
{
	r->method = ah_param_env(r, "REQUEST_METHOD");
	if (!r->method)
		r->method = "GET";
	r->request_id = ah_param_env(r, "REQUEST_ID");
	if (!r->request_id || !*r->request_id || strlen(r->request_id) > 64)
		r->request_id = ah_id_new(r->arena, "req");
	r->remote_addr = ah_param_env(r, "REMOTE_ADDR");
	if (!r->remote_addr)
		r->remote_addr = "unknown";
	r->content_type = ah_param_env(r, "CONTENT_TYPE");
	const char *cl = ah_param_env(r, "CONTENT_LENGTH");
	if (!cl || !*cl || ah_parse_ll(&r->content_length, cl) != 0)
		r->content_length = -1;
	ah_log_set_request_id(r->request_id);
}

static int rate_limit(ah_req *r, const ah_route *rt)
{
	bool invoke = rt && (rt->flags & AH_R_INVOKE) && r->user;
	long long limit = invoke ? ah_settings_of(r->cfg)->api.rate_limit_invoke
	                         : ah_settings_of(r->cfg)->api.rate_limit_crud;
	const char *subject = r->user ? ah_sprintf(r->arena, "u:%s", r->user->id)
	                              : ah_sprintf(r->arena, "ip:%s", r->remote_addr);
	/* Uncounted routes (load balancers' /health) still say where the caller
	 * stands, as every response does. So does a request nginx had a worker
	 * check first (auth_request): the check was counted. */
	if ((rt && (rt->flags & AH_R_NO_RATE)) || ah_auth_checked(r)) {
		ah_ratelimit_peek(r, subject, invoke ? 'i' : 'c', limit);
		return 0;
	}
	bool over;
	if (ah_ratelimit_hit(r, subject, invoke ? 'i' : 'c', limit, &over) != 0)
		return ah_reply_error(r, 500, "Internal server error");
	if (!over)
		return 0;
	long long wait = r->rate.reset - ah_now_ms() / 1000;
	if (wait < 1)
		wait = 1;
	ah_header(r, "Retry-After", ah_sprintf(r->arena, "%lld", wait));
	return ah_reply_refusal(r, 429, ah_sprintf(r->arena,
	                        "Rate limit exceeded. Try again in %lld seconds.", wait));
}

/* Reads the whole body (up to the route's limit) into r->body. */
static int read_body(ah_req *r, const ah_route *rt)
{
	size_t limit = rt->body_limit ? rt->body_limit : AH_BODY_DEFAULT;
	if (r->content_length > (long long)limit)
		return ah_reply_error(r, 413, ah_sprintf(r->arena,
		                      "Request body too large (limit %zu bytes)", limit));
	if (r->content_length <= 0)
		return 0;
	r->body = ah_alloc(r->arena, (size_t)r->content_length + 1);
	int n = FCGX_GetStr(r->body, (int)r->content_length, r->fcgi->in);
	r->body_len = n > 0 ? (size_t)n : 0;
	r->body[r->body_len] = '\0';
	return 0;
}

static int authenticate(ah_req *r, const ah_route *rt, const char **why)
{
	assert(rt);
	*why = NULL;
	/* Public routes still honour a key for per-user counting, but never require one. */
	if (rt->flags & AH_R_PUBLIC)
		return 0;
	int rc = rt->scope && r->nparams > 0
	             ? ah_auth_request_scoped(r, rt->scope, r->params[0], why)
	             : ah_auth_request(r, why);
	if (rc == AH_EFAIL)
		return AH_EFAIL;
	return 0;
}

static int route_and_run(ah_req *r, const ah_route *const *routes, const ah_route **matched)
{
	const ah_route *rt = NULL;
	const char *allow = NULL, *why = NULL;
	/* An unsplittable URI is a 404 like any unknown path, counted like one. */
	int m = split_uri(r) != 0 ? AH_MATCH_NO_PATH
	                          : ah_route_match(r, routes, r->method, r->path, &rt, &allow);
	*matched = m == AH_MATCH_OK ? rt : NULL;
	if (m == AH_MATCH_OK && authenticate(r, rt, &why) != 0)
		return ah_reply_error(r, 500, "Internal server error");
	if (rate_limit(r, m == AH_MATCH_OK ? rt : NULL) != 0)
		return AH_EDONE;
	if (m == AH_MATCH_NO_PATH)
		return ah_reply_refusal(r, 404, "Not Found");
	if (m == AH_MATCH_NO_METHOD) {
		ah_header(r, "Allow", allow);
		return ah_reply_refusal(r, 405, "Method Not Allowed");
	}
	if (why) {
		ah_header(r, "WWW-Authenticate", "Bearer");
		return ah_reply_error(r, 401, why);
	}
	if (r->user && r->user->disabled)
		return ah_reply_error(r, 403, "User account is disabled");
	if (!(rt->flags & AH_R_STREAM) && read_body(r, rt) != 0)
		return AH_EDONE;
	return rt->fn(r);
}

void ah_dispatch(ah_req *r, const ah_route *const *routes)
{
	int64_t start = ah_now_ms(), start_us = ah_mono_us();
	r->start_us = start_us;
	init_req(r);
	const ah_route *rt = NULL;
	int rc = route_and_run(r, routes, &rt);
	if (!r->responded) {
		if (rc != AH_EDONE && rc != 0)
			ah_log_error("handler for %s %s failed (%d)", r->method, r->path ? r->path : "?", rc);
		ah_reply_error(r, 500, "Internal server error");
	}
	ah_api_metrics_count(routes, rt, r->status, ah_mono_us() - start_us);
	ah_log_info("%s %s %d %lldms", r->method, r->path ? r->path : "?", r->status,
	            (long long)(ah_now_ms() - start));
	ah_log_set_request_id(NULL);
}

void ah_dispatch_metrics(ah_req *r, const ah_route *const *routes)
{
	init_req(r);
	/* A scrape is none of the API's routes, is not counted and writes no log line. */
	if (ah_api_metrics_asked(r))
		ah_api_metrics_reply(r, routes);
	else
		ah_reply_error(r, 404, "Not Found");
	ah_log_set_request_id(NULL);
}
