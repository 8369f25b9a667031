/* The model gateway: see gateway.h. One acceptor thread per invocation that
 * uses it, and one thread per connection (at most MAX_CONNS at once); each
 * connection carries one request (the answer says Connection: close and ends
 * with the connection), so there is no keep-alive state to bound.
 *
 * Why the agent's own loopback: the sandbox's network namespace has no path to
 * the host by design (net.c drops it), and a listener there needs no firewall
 * exception, no host address and no port on the host at all; the token is
 * still checked, and the listener exists only while the invocation runs. */
#include "runner/gateway.h"

#include "core/log.h"
#include "runner/gateway_int.h"
#include "runner/run_req.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int ah_gateway_global_init(ah_err *err)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return ah_err_set(err, AH_EFAIL, "libcurl initialisation failed");
	return 0;
}

void ah_gateway_new_token(char *out)
{
	unsigned char raw[32];
	randombytes_buf(raw, sizeof raw);
	memcpy(out, "ahg_", 4);
	sodium_bin2base64(out + 4, AH_GATEWAY_TOKEN_LEN - 3, raw, sizeof raw,
	                  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	sodium_memzero(raw, sizeof raw);
}

int ah_gateway_env(struct ah_run_req *q, const ah_config *cfg, char *token, ah_err *err)
{
	const char *name = ah_settings_of(cfg)->model.key_name;
	ah_gateway_new_token(token);
	ah_run_req_unsetenv(q, name);
	ah_run_req_unsetenv(q, "ANTHROPIC_BASE_URL");
	int rc = ah_run_req_setenv(q, name, token, err);
	return rc ? rc : ah_run_req_setenv(q, "ANTHROPIC_BASE_URL", AH_GATEWAY_URL, err);
}

int ah_gateway_read_key(char **out, const ah_config *cfg, ah_err *err)
{
	const char *v = ah_settings_of(cfg)->model.key_value;
	const char *path = ah_settings_of(cfg)->model.key_file;
	char *buf = calloc(1, KEY_MAX + 1);
	if (!buf)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	size_t n = 0;
	if (*v || !*path) {
		n = strnlen(v, KEY_MAX);
		memcpy(buf, v, n);
	} else {
		FILE *f = fopen(path, "re");
		if (!f) {
			free(buf);
			return ah_err_set(err, AH_EFAIL, "cannot read model_key_file %s", path);
		}
		n = fread(buf, 1, KEY_MAX, f);
		fclose(f);
	}
	while (n > 0 && strchr(" \t\r\n", buf[n - 1]))
		n--;
	buf[n] = '\0';
	*out = buf;
	return 0;
}


/* Why a request is refused before anything is forwarded: 0, or the status,
 * with the provider's error type and a message of ours (never the agent's
 * bytes: they would need escaping, and the log must not carry them). */
static int refusal(struct exchange *x, const char **type, const char **msg)
{
	int bad = gw_parse_head(x);
	*type = "invalid_request_error";
	*msg = "request refused by the model gateway";
	if (bad == 0 && !gw_token_ok(x->g, x->token)) {
		*type = "authentication_error";
		*msg = "invalid model gateway token";
		return 401;
	}
	if (bad == 0 && x->content_length > (long long)x->g->max_body)
		bad = 413;
	if (bad == 0 && !(x->route = gw_policy_route(&x->g->policy, x->method, x->target))) {
		*type = "permission_error";
		*msg = "the model gateway does not forward this endpoint (model_gateway_endpoints)";
		return 403;
	}
	if (bad == 0 && x->route->metered && !atomic_load(&x->g->ended)) {
		char why[AH_GATEWAY_WHY_LEN - 20];
		if (gw_budget_spent(x->g->budget, x->g->tag, why, sizeof why))
			gw_end_budget(x->g, why);
	}
	/* ended is stored last (gw_end_budget): once it is seen, so are the rest. */
	if (bad == 0 && atomic_load(&x->g->ended) && atomic_load(&x->g->over_budget)) {
		*type = "billing_error";
		*msg = x->g->ended_why; /* our own words: no quote, no backslash */
		return 402;
	}
	if (bad == 0 && atomic_load(&x->g->ended)) {
		*type = "permission_error";
		*msg = "model access for this invocation has ended: the usage of an earlier answer "
		       "could not be read";
		return 403;
	}
	return bad;
}

static void serve(struct exchange *x)
{
	int rc = gw_read_head(x);
	if (rc != 0) {
		if (rc == AH_ETOOBIG) {
			gw_send_error(x->fd, 431, "invalid_request_error", "request head too large");
			gw_drain(x->fd);
		}
		return;
	}
	const char *type, *msg;
	int bad = refusal(x, &type, &msg);
	if (bad) {
		gw_send_error(x->fd, bad, type, msg);
		if (atomic_fetch_add(&x->g->refused, 1) < LOG_REFUSED)
			ah_log_warn("%s model gateway: request refused (%d)", x->g->tag, bad);
		gw_drain(x->fd);
		return;
	}
	x->body_off = x->head_len;
	x->body_left = x->content_length > 0 ? x->content_length : 0;
	gw_forward(x);
	if (x->body_left > 0) /* the provider answered before taking it all */
		gw_drain(x->fd);
	char why[AH_GATEWAY_WHY_LEN - 20];
	if (gw_budget_charge(x->g->budget, &x->usage, x->g->tag, why, sizeof why))
		gw_end_budget(x->g, why); /* the crossing: no request after this one */
	char path[100];
	gw_log_path(path, sizeof path, x->target);
	ah_log_info("%s model gateway: %s %s -> %ld (%lld in, %lld out)", x->g->tag, x->method, path,
	            x->status, x->usage.input_tokens, x->usage.output_tokens);
}

/* As gw_end_access, with the reason and the flag written before ended, so
 * that a request that sees it ended is refused as over budget. */
void gw_end_budget(ah_gateway *g, const char *why)
{
	pthread_mutex_lock(&g->mu);
	bool first = !atomic_load(&g->ended);
	if (first) {
		snprintf(g->ended_why, sizeof g->ended_why, "budget reached: %s", why);
		atomic_store(&g->over_budget, 1);
		atomic_store(&g->ended, 1);
	}
	pthread_mutex_unlock(&g->mu);
	if (first)
		ah_log_warn("%s model gateway: model access ended: %s", g->tag, g->ended_why);
}

/* ---- connections ---- */

struct conn {
	ah_gateway *g;
	int slot;
};

static void wipe_headers(struct curl_slist *l)
{
	for (struct curl_slist *i = l; i; i = i->next)
		sodium_memzero(i->data, strlen(i->data));
	curl_slist_free_all(l);
}

static void *conn_thread(void *arg)
{
	struct conn c = *(struct conn *)arg;
	ah_gateway *g = c.g;
	free(arg);
	struct exchange *x = calloc(1, sizeof(*x));
	if (x) {
		x->g = g;
		x->fd = g->conns[c.slot];
		serve(x);
		wipe_headers(x->hdrs);
	}
	pthread_mutex_lock(&g->mu);
	int fd = g->conns[c.slot];
	g->conns[c.slot] = -1; /* before close: stop must never cut a reused number */
	if (x) {
		g->usage.input_tokens += x->usage.input_tokens;
		g->usage.output_tokens += x->usage.output_tokens;
		g->usage.cache_write_tokens += x->usage.cache_write_tokens;
		g->usage.cache_read_tokens += x->usage.cache_read_tokens;
		g->usage.cache_write_1h_tokens += x->usage.cache_write_1h_tokens;
		g->usage.requests += x->usage.requests;
		if (x->usage.error[0]) /* the last error wins */
			memcpy(g->usage.error, x->usage.error, sizeof g->usage.error);
	}
	pthread_mutex_unlock(&g->mu);
	close(fd);
	free(x);
	uint64_t one = 1;
	(void)!write(g->wake, &one, sizeof one); /* the acceptor has room again */
	pthread_mutex_lock(&g->mu);
	g->active--; /* from here on stop may free g */
	pthread_cond_broadcast(&g->idle);
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

static void start_conn(ah_gateway *g, int fd)
{
	struct timeval tv = { .tv_sec = IO_TIMEOUT_S };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	struct conn *c = malloc(sizeof(*c));
	pthread_mutex_lock(&g->mu);
	int slot = 0;
	while (slot < MAX_CONNS && g->conns[slot] >= 0)
		slot++;
	if (!c || slot == MAX_CONNS) {
		pthread_mutex_unlock(&g->mu);
		free(c);
		close(fd);
		return;
	}
	g->conns[slot] = fd;
	g->active++;
	pthread_mutex_unlock(&g->mu);
	*c = (struct conn){ g, slot };
	pthread_t t;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &at, conn_thread, c) != 0) {
		pthread_mutex_lock(&g->mu);
		g->conns[slot] = -1;
		g->active--;
		pthread_mutex_unlock(&g->mu);
		free(c);
		close(fd);
	}
	pthread_attr_destroy(&at);
}

static void *acceptor(void *arg)
{
	ah_gateway *g = arg;
	while (!atomic_load(&g->stopping)) {
		pthread_mutex_lock(&g->mu);
		bool room = g->active < MAX_CONNS;
		pthread_mutex_unlock(&g->mu);
		struct pollfd p[2] = { { g->wake, POLLIN, 0 }, { g->lfd, room ? POLLIN : 0, 0 } };
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		uint64_t v;
		if (p[0].revents & POLLIN)
			(void)!read(g->wake, &v, sizeof v);
		if (atomic_load(&g->stopping))
			break;
		if (p[1].revents & POLLIN) {
			int fd = accept4(g->lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0)
				start_conn(g, fd);
		}
	}
	return NULL;
}

/* ---- one invocation's gateway ---- */

static int upstream_from(ah_gateway *g, const ah_config *cfg, ah_err *err)
{
	const char *u = ah_settings_of(cfg)->model.upstream;
	size_t n = strlen(u);
	while (n > 0 && u[n - 1] == '/')
		n--;
	if ((strncmp(u, "https://", 8) != 0 && strncmp(u, "http://", 7) != 0) ||
	    n >= sizeof g->upstream)
		return ah_err_set(err, AH_EINVALID, "model_gateway_upstream must be an http(s) URL");
	memcpy(g->upstream, u, n);
	g->upstream[n] = '\0';
	return 0;
}

int ah_gateway_check_config(const ah_config *cfg, ah_err *err)
{
	ah_gateway *g = calloc(1, sizeof(*g)); /* big: not on a thread's stack */
	if (!g)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	int rc = upstream_from(g, cfg, err);
	if (rc == 0)
		rc = gw_policy_load(&g->policy, cfg, err);
	free(g);
	return rc;
}

int ah_gateway_start(ah_gateway **out, const ah_config *cfg, int listen_fd, const char *key,
                     const char *token, const char *tag, int timeout_ms,
                     struct json_object *budget, ah_err *err)
{
	ah_gateway *g = calloc(1, sizeof(*g));
	if (!g || !(g->key = strdup(key))) {
		free(g);
		close(listen_fd);
		return ah_err_set(err, AH_EFAIL, "out of memory");
	}
	g->lfd = listen_fd;
	g->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	for (int i = 0; i < MAX_CONNS; i++)
		g->conns[i] = -1;
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->idle, NULL);
	snprintf(g->token, sizeof g->token, "%s", token);
	snprintf(g->tag, sizeof g->tag, "%s", tag);
	g->deadline_ms = gw_mono_ms() + timeout_ms;
	g->max_body = (size_t)ah_settings_of(cfg)->model.max_body_bytes;
	int rc = upstream_from(g, cfg, err);
	if (rc == 0)
		rc = gw_policy_load(&g->policy, cfg, err);
	if (rc == 0)
		rc = gw_budget_load(&g->budget, cfg, budget, err);
	if (rc == 0 && (g->wake < 0 || pthread_create(&g->acceptor, NULL, acceptor, g) != 0))
		rc = ah_err_set(err, AH_EFAIL, "cannot start the model gateway");
	g->acceptor_started = rc == 0;
	if (rc != 0) {
		atomic_store(&g->stopping, 1);
		ah_gateway_stop(g, NULL);
		return rc;
	}
	*out = g;
	return 0;
}

void ah_gateway_stop(ah_gateway *g, ah_gateway_usage *usage)
{
	if (!g)
		return;
	uint64_t one = 1;
	atomic_store(&g->stopping, 1);
	if (g->wake >= 0)
		(void)!write(g->wake, &one, sizeof one);
	if (g->acceptor_started)
		pthread_join(g->acceptor, NULL);
	close(g->lfd); /* no new connection from here on: the token is dead */
	pthread_mutex_lock(&g->mu);
	for (int i = 0; i < MAX_CONNS; i++)
		if (g->conns[i] >= 0)
			shutdown(g->conns[i], SHUT_RDWR);
	while (g->active > 0)
		pthread_cond_wait(&g->idle, &g->mu);
	pthread_mutex_unlock(&g->mu);
	if (usage) {
		*usage = g->usage;
		snprintf(usage->ended, sizeof usage->ended, "%s", g->ended_why);
		usage->budget_charged = gw_budget_charged(g->budget);
	}
	gw_budget_free(g->budget);
	if (atomic_load(&g->refused) > LOG_REFUSED)
		ah_log_warn("%s model gateway: %d requests refused in all", g->tag, atomic_load(&g->refused));
	if (g->wake >= 0)
		close(g->wake);
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->idle);
	sodium_memzero(g->key, strlen(g->key));
	sodium_memzero(g->token, sizeof g->token);
	free(g->key);
	free(g);
}
