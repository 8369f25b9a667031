/* The model gateway's insides, shared by its three files: gateway.c (the
 * invocation's listener and connections), gateway_agent.c (the request as the
 * agent sends it) and gateway_upstream.c (the provider's side). Not an API. */
#ifndef AH_RUNNER_GATEWAY_INT_H
#define AH_RUNNER_GATEWAY_INT_H

#include "runner/gateway.h"

#include <curl/curl.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#define MAX_CONNS 4
#define HEAD_CAP (64 << 10)
#define IO_TIMEOUT_S 30
#define KEY_MAX 4096
#define LOG_REFUSED 5 /* an agent must not be able to flood the runner's log */

/* gateway_policy.c: what passes (model_gateway_endpoints,
 * model_gateway_response_headers), read once per gateway. */
#define GW_ROUTES_MAX 16
#define GW_RESP_MAX 32
struct gw_route {
	char method[8], path[128];
	bool metered;              /* "usage": the answer must carry usage; else "free" */
};
struct gw_policy {
	struct gw_route routes[GW_ROUTES_MAX];
	int n_routes;
	char resp[GW_RESP_MAX][64]; /* header names passed back; "x-*" a prefix */
	int n_resp;
};

struct ah_gateway {
	int lfd, wake;             /* listener; eventfd: stop, or a connection ended */
	pthread_t acceptor;
	bool acceptor_started;
	pthread_mutex_t mu;
	pthread_cond_t idle;
	int active;                /* connection threads running */
	int conns[MAX_CONNS];      /* their sockets (-1: free), for stop to cut */
	atomic_int stopping;
	atomic_int refused;        /* requests refused: logged one by one up to LOG_REFUSED */
	ah_gateway_usage usage;
	char *key;
	char token[AH_GATEWAY_TOKEN_LEN + 1];
	char upstream[512];
	char tag[80];
	long long deadline_ms;     /* monotonic */
	size_t max_body;
	struct gw_policy policy;
	/* Set once (under mu) when an answer's usage could not be read: every
	 * request after it is refused, and the invocation records why. */
	atomic_int ended;
	char ended_why[AH_GATEWAY_WHY_LEN];
	atomic_int over_budget;    /* ended because a budget is spent: requests get 402 */
	struct gw_budget *budget;  /* the call's spend limits (gateway_budget.c), or NULL */
};

/* One request and its answer. */
struct exchange {
	ah_gateway *g;
	int fd;
	char in[HEAD_CAP + 1];     /* the request head (+ the first body bytes) */
	size_t in_len, head_len;
	char *method, *target;
	const struct gw_route *route;
	const char *token;         /* as the client sent it */
	long long content_length;
	bool chunked;
	size_t body_off;           /* body bytes that came with the head: in[body_off..in_len) */
	long long body_left;       /* still to pass on */
	struct curl_slist *hdrs;
	long status;               /* the provider's */
	char out[HEAD_CAP];        /* its headers, as forwarded */
	size_t out_len;
	char ctype[128];
	bool head_sent;
	bool agent_gone;           /* the agent stopped reading: the answer is still metered */
	ah_gw_meter *meter;
	ah_gateway_usage usage;
};


static inline long long gw_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* gateway_agent.c */
int gw_send_all(int fd, const char *p, size_t len);
void gw_send_error(int fd, int status, const char *type, const char *msg);
int gw_read_head(struct exchange *x);
int gw_parse_head(struct exchange *x);
bool gw_token_ok(const ah_gateway *g, const char *t);
bool gw_hop_by_hop(const char *name);
void gw_log_path(char *out, size_t cap, const char *target);
void gw_drain(int fd);

void gw_end_access(ah_gateway *g, const char *why);

/* gateway_upstream.c */
void gw_forward(struct exchange *x);

/* gateway_budget.c: NULL spec, NULL *out (no budget). */
struct gw_budget;
int gw_budget_load(struct gw_budget **out, const ah_config *cfg, json_object *spec, ah_err *err);
void gw_budget_free(struct gw_budget *b);
/* Whether a budget with a limit is spent (why says which); b NULL: false. */
bool gw_budget_spent(struct gw_budget *b, const char *tag, char *why, size_t cap);
/* Adds the cost of one answer's usage u to every row, then as gw_budget_spent. */
bool gw_budget_charge(struct gw_budget *b, const ah_gateway_usage *u, const char *tag, char *why,
                      size_t cap);
/* Pico-dollars charged to the rows so far. */
long long gw_budget_charged(const struct gw_budget *b);
/* Ends model access for a spent budget (gateway.c). */
void gw_end_budget(ah_gateway *g, const char *why);

/* gateway_policy.c */
bool gw_tchar(int c);
int gw_policy_load(struct gw_policy *pol, const ah_config *cfg, ah_err *err);
/* The configured endpoint for method and target (its query aside), or NULL. */
const struct gw_route *gw_policy_route(const struct gw_policy *pol, const char *method,
                                       const char *target);
/* Whether an answer header of this name is passed back to the agent. */
bool gw_policy_header_out(const struct gw_policy *pol, const char *name);

#endif
