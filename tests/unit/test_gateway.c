/* Unit test of the model gateway (lib/runner/gateway.c), printed as TAP. The
 * gateway serves a listener on 127.0.0.1 here (in the runner it is one inside
 * a sandbox's network namespace: same code from accept on) and forwards to a
 * fake provider this test serves on 127.0.0.1 too. One table row per request:
 * a gateway is started for it and stopped after, and the row says what the
 * agent gets and what the provider's usage adds up to. The ASan pass of
 * scripts/test runs this too. */
#include "runner/gateway.h"

#include <arpa/inet.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tap.h"

#define KEY "sk-operator-key-0123456789"
#define MAX_BODY 4096

/* ---- the fake provider: one request per connection ---- */

static int provider_fd;
static char provider_key[256];   /* x-api-key of the last request it saw */
static bool provider_saw_token;  /* any "ahg_" anywhere in a request */
static int provider_requests;
static pthread_mutex_t provider_mu = PTHREAD_MUTEX_INITIALIZER;

static const char JSON_ANSWER[] =
	"{\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],"
	"\"usage\":{\"input_tokens\":11,\"output_tokens\":22}}";
static const char SSE_ANSWER[] =
	"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":"
	"{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":6}}\n\n"
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
static const char CACHE_ANSWER[] =
	"{\"usage\":{\"input_tokens\":100,\"cache_creation_input_tokens\":20,"
	"\"cache_read_input_tokens\":300,\"output_tokens\":4}}";

static void provider_answer(int fd, const char *req)
{
	const char *ctype = "application/json", *body = JSON_ANSWER;
	int status = 200;
	if (strncmp(req, "POST /v1/stream ", 16) == 0) {
		ctype = "text/event-stream";
		body = SSE_ANSWER;
	} else if (strncmp(req, "POST /v1/overloaded ", 20) == 0) {
		status = 529;
	} else if (strncmp(req, "POST /v1/nousage ", 17) == 0) {
		body = "{\"type\":\"message\"}";
	} else if (strncmp(req, "POST /v1/cache ", 15) == 0) {
		body = CACHE_ANSWER;
	}
	char head[512];
	int n = snprintf(head, sizeof head, "HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
	                 "request-id: req_1\r\nSet-Cookie: session=provider-secret\r\n"
	                 "anthropic-organization-id: org-secret\r\nX-Internal-Route: secret\r\n"
	                 "Connection: close\r\n\r\n", status, ctype, strlen(body));
	if (write(fd, head, (size_t)n) != n || write(fd, body, strlen(body)) < 0)
		return;
}

static void *provider_main(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(provider_fd, NULL, NULL);
		if (fd < 0)
			continue;
		char req[16384];
		ssize_t len = 0, n;
		while (len < (ssize_t)sizeof req - 1 &&
		       (n = read(fd, req + len, sizeof req - 1 - (size_t)len)) > 0) {
			len += n;
			req[len] = '\0';
			const char *end = strstr(req, "\r\n\r\n"), *cl = strcasestr(req, "content-length:");
			if (end && len - (end + 4 - req) >= (cl ? atol(cl + 15) : 0))
				break;
		}
		req[len] = '\0';
		pthread_mutex_lock(&provider_mu);
		const char *k = strcasestr(req, "\r\nx-api-key: ");
		snprintf(provider_key, sizeof provider_key, "%.*s", k ? (int)strcspn(k + 13, "\r") : 0,
		         k ? k + 13 : "");
		provider_saw_token = provider_saw_token || strstr(req, "ahg_") != NULL;
		provider_requests++;
		pthread_mutex_unlock(&provider_mu);
		provider_answer(fd, req);
		close(fd);
	}
	return NULL;
}

static int listen_loopback(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0)
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

/* ---- the agent's side ---- */

/* Sends req to 127.0.0.1:port and reads the answer to its end; the status. */
static int agent_call(int port, const char *req, char *out, size_t cap)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	size_t len = 0;
	ssize_t n;
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
		return -1;
	if (write(fd, req, strlen(req)) < 0) {
		close(fd);
		return -1;
	}
	while (len + 1 < cap && (n = read(fd, out + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = '\0';
	close(fd);
	return strncmp(out, "HTTP/1.1 ", 9) == 0 ? (int)strtol(out + 9, NULL, 10) : -1;
}

/* T in a request stands for the invocation's token. */
static const struct {
	const char *what, *req, *body_has;
	int status;
	long long in, out;
	int forwarded;
	bool ended;         /* the usage could not be read: model access ended */
} cases[] = {
	{"token as x-api-key: the provider's answer, its usage counted",
	 "POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: T\r\ncontent-type: application/json\r\n"
	 "Content-Length: 2\r\n\r\n{}", "\"text\":\"hi\"", 200, 11, 22, 1},
	{"token as a bearer token",
	 "POST /v1/messages HTTP/1.1\r\nAuthorization: Bearer T\r\nContent-Length: 0\r\n\r\n",
	 "request-id: req_1", 200, 11, 22, 1},
	{"server-sent events: message_start and message_delta",
	 "POST /v1/stream HTTP/1.1\r\nx-api-key: T\r\nContent-Length: 2\r\n\r\n{}",
	 "message_delta", 200, 5, 6, 1},
	{"a provider error is passed on and counts nothing",
	 "POST /v1/overloaded HTTP/1.1\r\nx-api-key: T\r\nContent-Length: 2\r\n\r\n{}",
	 "usage", 529, 0, 0, 1},
	{"a body up to the cap",
	 "POST /v1/messages HTTP/1.1\r\nx-api-key: T\r\nContent-Length: 4096\r\n\r\n",
	 "\"text\":\"hi\"", 200, 11, 22, 1},
	{"another token is refused", "POST /v1/messages HTTP/1.1\r\nx-api-key: ahg_"
	 "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\nContent-Length: 2\r\n\r\n{}",
	 "authentication_error", 401, 0, 0, 0},
	{"no token is refused", "POST /v1/messages HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
	 "authentication_error", 401, 0, 0, 0},
	{"the operator's key itself is refused", "POST /v1/messages HTTP/1.1\r\nx-api-key: " KEY
	 "\r\nContent-Length: 0\r\n\r\n", "authentication_error", 401, 0, 0, 0},
	{"a path outside /v1/", "POST /admin HTTP/1.1\r\nx-api-key: T\r\n\r\n", "error", 404, 0, 0, 0},
	{"dot segments", "GET /v1/../admin HTTP/1.1\r\nx-api-key: T\r\n\r\n", "error", 404, 0, 0, 0},
	{"a method other than GET, POST, DELETE", "PUT /v1/messages HTTP/1.1\r\nx-api-key: T\r\n\r\n",
	 "error", 405, 0, 0, 0},
	{"a chunked body", "POST /v1/messages HTTP/1.1\r\nx-api-key: T\r\n"
	 "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "error", 411, 0, 0, 0},
	{"a body over the cap", "POST /v1/messages HTTP/1.1\r\nx-api-key: T\r\n"
	 "Content-Length: 4097\r\n\r\n", "error", 413, 0, 0, 0},
	{"a malformed request line", "POST\r\nx-api-key: T\r\n\r\n", "error", 400, 0, 0, 0},
	{"a malformed content length", "POST /v1/messages HTTP/1.1\r\nx-api-key: T\r\n"
	 "Content-Length: 12x\r\n\r\n", "error", 400, 0, 0, 0},
	/* fail closed: only the configured endpoints (model_gateway_endpoints) */
	{"Message Batches are not forwarded", "POST /v1/messages/batches HTTP/1.1\r\nx-api-key: T\r\n"
	 "Content-Length: 2\r\n\r\n{}", "permission_error", 403, 0, 0, 0},
	{"nor their results", "GET /v1/messages/batches/msgbatch_1/results HTTP/1.1\r\nx-api-key: T\r\n\r\n",
	 "permission_error", 403, 0, 0, 0},
	{"an endpoint with another method", "GET /v1/messages HTTP/1.1\r\nx-api-key: T\r\n\r\n",
	 "permission_error", 403, 0, 0, 0},
	{"an endpoint's path with more after it", "POST /v1/messages/ HTTP/1.1\r\nx-api-key: T\r\n"
	 "Content-Length: 0\r\n\r\n", "permission_error", 403, 0, 0, 0},
	{"a query passes with its endpoint", "POST /v1/messages?beta=true HTTP/1.1\r\nx-api-key: T\r\n"
	 "Content-Length: 0\r\n\r\n", "\"text\":\"hi\"", 200, 11, 22, 1},
	{"a free endpoint's answer needs no usage", "POST /v1/messages/count_tokens HTTP/1.1\r\n"
	 "x-api-key: T\r\nContent-Length: 0\r\n\r\n", "\"text\":\"hi\"", 200, 0, 0, 1},
	/* header names are tokens, values hold no line break */
	{"a space before the colon", "POST /v1/messages HTTP/1.1\r\nx-api-key: T\r\n"
	 "anthropic-beta : x\r\nContent-Length: 0\r\n\r\n", "error", 400, 0, 0, 0},
	{"a name with a separator", "POST /v1/messages HTTP/1.1\r\nx-api-key: T\r\n"
	 "x(y): 1\r\nContent-Length: 0\r\n\r\n", "error", 400, 0, 0, 0},
	{"a folded line", "POST /v1/messages HTTP/1.1\r\nx-api-key: T\r\n"
	 "x-a: 1\r\n x-b: 2\r\nContent-Length: 0\r\n\r\n", "error", 400, 0, 0, 0},
	{"a lone LF in a value", "POST /v1/messages HTTP/1.1\r\nx-api-key: T\r\n"
	 "x-a: 1\nHost: elsewhere\r\nContent-Length: 0\r\n\r\n", "error", 400, 0, 0, 0},
	{"a control character in the target", "POST /v1/messages\x01 HTTP/1.1\r\nx-api-key: T\r\n"
	 "Content-Length: 0\r\n\r\n", "error", 400, 0, 0, 0},
	/* the answer's usage: cache parts apart, unreadable usage ends access */
	{"cache writes and reads counted apart", "POST /v1/cache HTTP/1.1\r\nx-api-key: T\r\n"
	 "Content-Length: 0\r\n\r\n", "usage", 200, 420, 4, 1},
	{"an answer without usage ends model access", "POST /v1/nousage HTTP/1.1\r\nx-api-key: T\r\n"
	 "Content-Length: 0\r\n\r\n", "message", 200, 0, 0, 1, true},
};

/* The request with T replaced by the token, and a body filled up to its
 * Content-Length when the row leaves it out. */
static char *request(const char *tmpl, const char *token)
{
	size_t cap = strlen(tmpl) + AH_GATEWAY_TOKEN_LEN + MAX_BODY + 1;
	char *r = calloc(1, cap), *w = r;
	for (const char *p = tmpl; *p; p++) {
		if (*p == 'T' && p > tmpl && p[-1] == ' ' && p[1] == '\r') {
			memcpy(w, token, strlen(token));
			w += strlen(token);
		} else {
			*w++ = *p;
		}
	}
	const char *cl = strstr(r, "Content-Length: "), *end = strstr(r, "\r\n\r\n");
	long want = cl ? strtol(cl + 16, NULL, 10) : 0;
	if (end && want > 0 && want <= MAX_BODY && (long)strlen(end + 4) < want)
		memset(w, 'x', (size_t)want - strlen(end + 4));
	return r;
}

/* The run request's budget rows reach SQL only as bound parameters, but a
 * row that is not the API's (odd characters, too many, no array) is refused
 * before the gateway starts; good rows start it without a database. */
static void budget_rows(const ah_config *cfg)
{
	static const struct { const char *json; int rc; } specs[] = {
		{"[{\"scope\":\"agent\",\"id\":\"agt_1\",\"period\":\"day\",\"start\":\"2026-11-28\","
		 "\"limit\":\"1.5\"},{\"scope\":\"agent\",\"id\":\"agt_1\",\"period\":\"month\","
		 "\"start\":\"2026-11-01\",\"limit\":null}]", 0},
		{"[]", AH_EINVALID},
		{"{\"scope\":\"agent\"}", AH_EINVALID},
		{"[{\"scope\":\"agent\",\"id\":\"agt'1\",\"period\":\"day\",\"start\":\"2026-11-28\"}]",
		 AH_EINVALID},
		{"[{\"scope\":\"agent\",\"id\":\"agt_1\",\"period\":\"day\",\"start\":\"2026-11-28\","
		 "\"limit\":\"1;2\"}]", AH_EINVALID},
		{"[{\"scope\":\"agent\",\"period\":\"day\",\"start\":\"2026-11-28\"}]", AH_EINVALID},
		{"[1,2,3,4,5,6,7]", AH_EINVALID},
	};
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
		int port, lfd = listen_loopback(&port);
		char token[AH_GATEWAY_TOKEN_LEN + 1];
		ah_gateway *g = NULL;
		ah_err err = {0};
		json_object *spec = json_tokener_parse(specs[i].json);
		ah_gateway_new_token(token);
		int rc = ah_gateway_start(&g, cfg, lfd, KEY, token, "test", 10000, spec, &err);
		ok(rc == specs[i].rc, "budget rows %zu: %s (%s)", i, rc ? "refused" : "taken", rc ? err.msg : "");
		ah_gateway_stop(rc == 0 ? g : NULL, NULL);
		json_object_put(spec);
	}
}

static void run_case(const ah_config *cfg, size_t i)
{
	int port, lfd = listen_loopback(&port);
	char token[AH_GATEWAY_TOKEN_LEN + 1], answer[65536];
	ah_gateway *g = NULL;
	ah_gateway_usage u = {0};
	ah_err err = {0};
	ah_gateway_new_token(token);
	int before = provider_requests;
	if (lfd < 0 || ah_gateway_start(&g, cfg, lfd, KEY, token, "test", 10000, NULL, &err) != 0) {
		ok(0, "%s: gateway start: %s", cases[i].what, err.msg);
		return;
	}
	char *req = request(cases[i].req, token);
	int status = agent_call(port, req, answer, sizeof answer);
	free(req);
	ah_gateway_stop(g, &u);
	ok(status == cases[i].status && strstr(answer, cases[i].body_has) &&
	   u.input_tokens == cases[i].in && u.output_tokens == cases[i].out &&
	   provider_requests - before == cases[i].forwarded && (*u.ended != 0) == cases[i].ended &&
	   /* the provider's error is reported (issue 27); the gateway's own refusals are not */
	   (cases[i].status == 529 ? strncmp(u.error, "529 ", 4) == 0 : u.error[0] == '\0'),
	   "%s: %d, in %lld out %lld, %d forwarded%s%s, error \"%s\"", cases[i].what, status,
	   u.input_tokens, u.output_tokens, provider_requests - before, *u.ended ? ", ended: " : "",
	   u.ended, u.error);
	/* only allow-listed answer headers reach the agent */
	if (cases[i].forwarded)
		ok(!strcasestr(answer, "set-cookie") && !strstr(answer, "secret") &&
		   (status >= 300 || strstr(answer, "request-id: req_1")),
		   "%s: only allow-listed answer headers", cases[i].what);
}

/* Two calls on one gateway: an answer without usage, then a good call. */
static void ended_access(const ah_config *cfg)
{
	int port, lfd = listen_loopback(&port);
	char token[AH_GATEWAY_TOKEN_LEN + 1], answer[65536];
	ah_gateway *g = NULL;
	ah_gateway_usage u = {0};
	ah_gateway_new_token(token);
	if (lfd < 0 || ah_gateway_start(&g, cfg, lfd, KEY, token, "test", 10000, NULL, NULL) != 0) {
		ok(0, "ended access: set-up");
		return;
	}
	char *req = request("POST /v1/nousage HTTP/1.1\r\nx-api-key: T\r\nContent-Length: 0\r\n\r\n", token);
	int first = agent_call(port, req, answer, sizeof answer);
	free(req);
	int before = provider_requests;
	req = request("POST /v1/messages HTTP/1.1\r\nx-api-key: T\r\nContent-Length: 0\r\n\r\n", token);
	int second = agent_call(port, req, answer, sizeof answer);
	free(req);
	ah_gateway_stop(g, &u);
	ok(first == 200 && second == 403 && strstr(answer, "model access for this invocation has ended") &&
	   provider_requests == before && strstr(u.ended, "POST /v1/nousage") &&
	   strstr(u.ended, "no usage in the answer"),
	   "after an answer without usage the next call is refused, not forwarded (%s)", u.ended);
}

static void bad_policy(void)
{
	static const char *const bad[] = {
		"model_gateway_endpoints = POST /v1/messages\n",
		"model_gateway_endpoints = POST /v1/messages usage extra\n",
		"model_gateway_endpoints = PUT /v1/messages usage\n",
		"model_gateway_endpoints = POST /v1/../admin free\n",
		"model_gateway_endpoints = POST /admin free\n",
		"model_gateway_response_headers = set cookie\n",
		"model_gateway_response_headers = *\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char path[] = "/tmp/ah-test-gateway-XXXXXX";
		int cf = mkstemp(path);
		dprintf(cf, "%s", bad[i]);
		close(cf);
		ah_config *cfg = NULL;
		ah_err err = {0};
		int rc = ah_config_load(&cfg, path, &err);
		unlink(path);
		ok(rc == 0 && ah_gateway_check_config(cfg, &err) == AH_EINVALID && strstr(err.msg, "model_gateway"),
		   "refused at start: %.*s (%s)", (int)strlen(bad[i]) - 1, bad[i], err.msg);
		ah_config_free(cfg);
	}
}

/* A connection that never sends a byte must not hold stop up. */
static void idle_connection(const ah_config *cfg)
{
	int port, lfd = listen_loopback(&port);
	char token[AH_GATEWAY_TOKEN_LEN + 1];
	ah_gateway *g = NULL;
	ah_gateway_new_token(token);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || fd < 0 || ah_gateway_start(&g, cfg, lfd, KEY, token, "test", 10000, NULL, NULL) != 0 ||
	    connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		ok(0, "idle connection: set-up");
		return;
	}
	usleep(100000); /* accepted and waiting for the head (or not: either is fine) */
	ah_gateway_stop(g, NULL);
	char c;
	ok(read(fd, &c, 1) == 0, "stop with an idle connection open: it is closed, stop returns");
	close(fd);
	int again = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ok(connect(again, (struct sockaddr *)&a, sizeof a) < 0, "after stop nothing listens");
	close(again);
}

int main(void)
{
	int pport;
	provider_fd = listen_loopback(&pport);
	pthread_t t;
	if (provider_fd < 0 || pthread_create(&t, NULL, provider_main, NULL) != 0)
		return 1;
	char path[] = "/tmp/ah-test-gateway-XXXXXX";
	int cf = mkstemp(path);
	dprintf(cf, "model_gateway_upstream = http://127.0.0.1:%d/\nmodel_gateway_max_body_bytes = %d\n"
	        "model_gateway_endpoints = POST /v1/messages usage, POST /v1/messages/count_tokens free, "
	        "POST /v1/stream usage, POST /v1/overloaded usage, POST /v1/nousage usage, "
	        "POST /v1/cache usage\n", pport, MAX_BODY);
	close(cf);
	unsetenv("AGENTHOST_MODEL_GATEWAY_UPSTREAM");
	unsetenv("AGENTHOST_MODEL_GATEWAY_MAX_BODY_BYTES");
	unsetenv("AGENTHOST_MODEL_GATEWAY_ENDPOINTS");
	unsetenv("AGENTHOST_MODEL_GATEWAY_RESPONSE_HEADERS");
	ah_config *cfg = NULL;
	ah_err err = {0};
	if (ah_config_load(&cfg, path, &err) != 0 || ah_gateway_global_init(&err) != 0)
		return 1;
	unlink(path);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		run_case(cfg, i);
	ok(strcmp(provider_key, KEY) == 0, "the provider got the operator's key as x-api-key");
	ok(!provider_saw_token, "the provider never saw a token");
	idle_connection(cfg);
	ended_access(cfg);
	bad_policy();
	budget_rows(cfg);
	ah_config_free(cfg);
	return tap_done();
}
