/* The model gateway (config model_gateway = on): agents get a per-invocation
 * token instead of the model-provider key, and ANTHROPIC_BASE_URL pointing at
 * a small HTTP/1.1 forwarder that the runner serves on 127.0.0.1:80 inside the
 * agent's own network namespace (ah_sandbox_listen_loopback). It accepts only
 * that invocation's token, only while the invocation runs, forwards the request
 * to the provider (model_gateway_upstream) with the real key as x-api-key, and
 * adds the provider's reported usage to the invocation's model token counts.
 *
 * Bounded: MAX_CONNS connections of one invocation at a time (more wait in the
 * listen backlog), a request head cap (64 KiB) and a body cap
 * (model_gateway_max_body_bytes, 32 MiB by default as the provider's own;
 * bodies stream through, never held whole), a 30 s limit on each read from and
 * write to the agent, and upstream calls end with the invocation. Neither key
 * nor token is ever logged. */
#ifndef AH_RUNNER_GATEWAY_H
#define AH_RUNNER_GATEWAY_H

#include <stddef.h>

#include "core/config.h"
#include "core/err.h"

#define AH_GATEWAY_PORT 80          /* below 1024: no agent can bind it first */
#define AH_GATEWAY_URL "http://127.0.0.1:80"
#define AH_GATEWAY_TOKEN_LEN 47     /* "ahg_" + 43 base64url characters */

typedef struct ah_gateway ah_gateway;

#define AH_GATEWAY_WHY_LEN 256

/* Summed over the provider's answers. input_tokens is all input, the cache's
 * included; cache_write_tokens and cache_read_tokens are the parts of it the
 * provider prices apart (cache_creation_input_tokens, cache_read_input_tokens),
 * and cache_write_1h_tokens the part of the writes kept for an hour
 * (cache_creation.ephemeral_1h_input_tokens), dearer again. */
typedef struct ah_gateway_usage {
	long long input_tokens, output_tokens;
	long long cache_write_tokens, cache_read_tokens, cache_write_1h_tokens;
	int requests;                          /* requests forwarded upstream */
	long long budget_charged;              /* pico-dollars charged to the call's budgets */
	char ended[AH_GATEWAY_WHY_LEN];        /* "", or why model access ended */
	/* The provider's last error answer (an HTTP error or an SSE "error"
	 * event), "STATUS TYPE: MESSAGE" in printable ASCII, "" when none: a
	 * failed invocation names it, since the agent's own exit rarely does. */
	char error[240];
} ah_gateway_usage;

/* Once, before any thread: libcurl's global set-up. */
int ah_gateway_global_init(ah_err *err);

/* A fresh token into out (AH_GATEWAY_TOKEN_LEN + 1 bytes). */
void ah_gateway_new_token(char *out);

/* A program's environment for the gateway: a fresh token into token
 * (AH_GATEWAY_TOKEN_LEN + 1 bytes) and in the model key variable (whatever
 * the API put there, the real key included, is dropped), and
 * ANTHROPIC_BASE_URL the gateway, so SDKs that read both need no change. */
struct ah_run_req;
int ah_gateway_env(struct ah_run_req *q, const ah_config *cfg, char *token, ah_err *err);

/* The configured model-provider key (model_key_value, else the contents of
 * model_key_file) into out (malloc'ed; "" when none); the caller wipes and
 * frees it. */
int ah_gateway_read_key(char **out, const ah_config *cfg, ah_err *err);

/* Checks the gateway's settings (upstream, endpoints, answer headers), for
 * the runner's start: a mistake there is found before any agent runs. */
int ah_gateway_check_config(const ah_config *cfg, ah_err *err);

/* Starts serving listen_fd (taken over: closed by stop) for one invocation
 * until stop. key and token are copied (and wiped at stop); tag names the
 * invocation in log lines; timeout_ms bounds every upstream call; budget is
 * the run request's "budget" (spend rows, gateway_budget.c) or NULL. */
struct json_object;
int ah_gateway_start(ah_gateway **out, const ah_config *cfg, int listen_fd, const char *key,
                     const char *token, const char *tag, int timeout_ms,
                     struct json_object *budget, ah_err *err);

/* Closes the listener, cuts every connection and upstream call still open,
 * waits for them, and reports what the provider counted. NULL is a no-op. */
void ah_gateway_stop(ah_gateway *g, ah_gateway_usage *usage);

/* gateway_usage.c: the provider's usage in an answer, fed as it streams. */
typedef struct ah_gw_meter ah_gw_meter;
/* content_type decides the format: a JSON body, or server-sent events; any
 * other answer has no usage we can read. NULL only when out of memory. */
ah_gw_meter *ah_gw_meter_new(const char *content_type);
/* 0, or -1 once the answer can no longer be read (too large, malformed): the
 * caller stops passing it on. m NULL: -1. */
int ah_gw_meter_feed(ah_gw_meter *m, const char *data, size_t len);
/* Ends the answer, adds what it reported to *u, and frees m. 0 when its usage
 * was read; AH_EINVALID when not, with *why saying what was wrong (what part
 * of it could be read, a streamed answer's input, is still added). */
int ah_gw_meter_finish(ah_gw_meter *m, ah_gateway_usage *u, const char **why);

#endif
