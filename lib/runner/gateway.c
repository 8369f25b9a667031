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

#define MAX_CONNS 4
#define HEAD_CAP (64 << 10)
#define IO_TIMEOUT_S 30
#define KEY_MAX 4096
#define LOG_REFUSED 5 /* an agent must not be able to flood the runner's log */

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
};

/* One request and its answer. */
struct exchange {
	ah_gateway *g;
	int fd;
	char in[HEAD_CAP + 1];     /* the request head (+ the first body bytes) */
	size_t in_len, head_len;
	char *method, *target;
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
	ah_gw_meter *meter;
	ah_gateway_usage usage;
};

static long long mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

int ah_gateway_read_key(char **out, const ah_config *cfg, ah_err *err)
{
	const char *v = ah_cfg_str(cfg, AH_CFG_MODEL_KEY_VALUE);
	const char *path = ah_cfg_str(cfg, AH_CFG_MODEL_KEY_FILE);
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

/* ---- talking to the agent ---- */

static int send_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* An answer of the gateway's own, in the provider's error shape so that SDKs
 * report it as they would the provider's. */
static void send_error(int fd, int status, const char *type, const char *msg)
{
	char body[512], head[256];
	int bn = snprintf(body, sizeof body,
	                  "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":\"%s\"}}",
	                  type, msg);
	int hn = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
	                  "Content-Length: %d\r\nConnection: close\r\n\r\n", status,
	                  status < 300 ? "OK" : "Error", bn);
	if (send_all(fd, head, (size_t)hn) == 0)
		send_all(fd, body, (size_t)bn);
}

/* Reads until the end of the request head. */
static int read_head(struct exchange *x)
{
	while (x->in_len < HEAD_CAP) {
		ssize_t n = recv(x->fd, x->in + x->in_len, HEAD_CAP - x->in_len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		x->in_len += (size_t)n;
		x->in[x->in_len] = '\0';
		char *end = strstr(x->in, "\r\n\r\n");
		if (end) {
			x->head_len = (size_t)(end - x->in) + 4;
			return 0;
		}
	}
	return AH_ETOOBIG;
}

static bool hop_by_hop(const char *name)
{
	static const char *const skip[] = {
		"connection", "keep-alive", "proxy-connection", "proxy-authorization",
		"proxy-authenticate", "te", "trailer", "transfer-encoding", "upgrade", "content-length",
		"host", "expect", "accept-encoding", "x-api-key", "authorization", NULL,
	};
	for (size_t i = 0; skip[i]; i++)
		if (strcasecmp(name, skip[i]) == 0)
			return true;
	return false;
}

/* One request header: noted when it matters here, forwarded unless it is
 * hop-by-hop or a credential (the client's token never goes upstream). */
static int take_header(struct exchange *x, char *line)
{
	char *colon = strchr(line, ':');
	if (!colon || colon == line || strpbrk(line, "\r\n"))
		return AH_EINVALID;
	*colon = '\0';
	char *v = colon + 1;
	v += strspn(v, " \t");
	if (strcasecmp(line, "x-api-key") == 0)
		x->token = v;
	else if (strcasecmp(line, "authorization") == 0 && strncasecmp(v, "Bearer ", 7) == 0)
		x->token = x->token ? x->token : v + 7;
	else if (strcasecmp(line, "content-length") == 0) {
		char *e;
		errno = 0;
		x->content_length = strtoll(v, &e, 10);
		if (errno || e == v || *e || x->content_length < 0)
			return AH_EINVALID;
	} else if (strcasecmp(line, "transfer-encoding") == 0)
		x->chunked = true;
	if (hop_by_hop(line))
		return 0;
	char buf[HEAD_CAP + 4];
	snprintf(buf, sizeof buf, "%s: %s", line, v);
	struct curl_slist *l = curl_slist_append(x->hdrs, buf);
	if (!l)
		return AH_EFAIL;
	x->hdrs = l;
	return 0;
}

/* The next CRLF-ended line of the head, NUL-terminated; NULL at its end. */
static char *next_line(char **p)
{
	char *line = *p, *end = strstr(line, "\r\n");
	if (!end || end == line)
		return NULL;
	*end = '\0';
	*p = end + 2;
	return line;
}

/* "METHOD /v1/... HTTP/1.x" and the headers; 0, or the status to answer. */
static int parse_head(struct exchange *x)
{
	char *p = x->in, *line = next_line(&p);
	char *sp1 = line ? strchr(line, ' ') : NULL, *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp2 || strncmp(sp2 + 1, "HTTP/1.", 7) != 0)
		return 400;
	*sp1 = *sp2 = '\0';
	x->method = line;
	x->target = sp1 + 1;
	x->content_length = -1;
	while ((line = next_line(&p)) != NULL)
		if (take_header(x, line) != 0)
			return 400;
	if (strcmp(x->method, "GET") && strcmp(x->method, "POST") && strcmp(x->method, "DELETE"))
		return 405;
	if (strncmp(x->target, "/v1/", 4) != 0 || strstr(x->target, ".."))
		return 404;
	return x->chunked ? 411 : 0;
}

static bool token_ok(const ah_gateway *g, const char *t)
{
	return t && strlen(t) == AH_GATEWAY_TOKEN_LEN &&
	       sodium_memcmp(t, g->token, AH_GATEWAY_TOKEN_LEN) == 0;
}

/* ---- the provider's answer, streamed back ---- */

static int send_head(struct exchange *x)
{
	char line[64];
	x->head_sent = true;
	int n = snprintf(line, sizeof line, "HTTP/1.1 %ld %s\r\n", x->status,
	                 x->status < 300 ? "OK" : "Error");
	if (x->status >= 200 && x->status < 300)
		x->meter = ah_gw_meter_new(x->ctype);
	if (send_all(x->fd, line, (size_t)n) != 0 || send_all(x->fd, x->out, x->out_len) != 0)
		return -1;
	return send_all(x->fd, "Connection: close\r\n\r\n", 21);
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	struct exchange *x = ud;
	size_t len = size * n;
	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) { /* a new answer (after a 1xx) */
		const char *sp = memchr(p, ' ', len);
		x->status = sp ? strtol(sp + 1, NULL, 10) : 502;
		x->out_len = 0;
		x->ctype[0] = '\0';
		return len;
	}
	const char *colon = memchr(p, ':', len);
	if (!colon || len > sizeof x->out - x->out_len)
		return len;
	char name[64];
	size_t nl = (size_t)(colon - p);
	if (nl >= sizeof name)
		return len;
	memcpy(name, p, nl);
	name[nl] = '\0';
	if (strcasecmp(name, "content-type") == 0) {
		const char *v = colon + 1, *end = p + len; /* not NUL-terminated */
		while (v < end && *v == ' ')
			v++;
		snprintf(x->ctype, sizeof x->ctype, "%.*s", (int)(end - v), v);
	}
	if (!hop_by_hop(name)) {
		memcpy(x->out + x->out_len, p, len);
		x->out_len += len;
	}
	return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct exchange *x = ud;
	size_t len = size * n;
	if (!x->head_sent && send_head(x) != 0)
		return 0;
	ah_gw_meter_feed(x->meter, p, len);
	return send_all(x->fd, p, len) == 0 ? len : 0;
}

/* The request body streams from the agent to the provider: the runner holds
 * no more of it than curl's buffer, whatever the size. */
static size_t on_read(char *buf, size_t size, size_t n, void *ud)
{
	struct exchange *x = ud;
	size_t want = size * n;
	if (x->body_left <= 0)
		return 0;
	if ((long long)want > x->body_left)
		want = (size_t)x->body_left;
	ssize_t got;
	if (x->body_off < x->in_len) {
		got = (ssize_t)(x->in_len - x->body_off < want ? x->in_len - x->body_off : want);
		memcpy(buf, x->in + x->body_off, (size_t)got);
		x->body_off += (size_t)got;
	} else {
		do
			got = recv(x->fd, buf, want, 0);
		while (got < 0 && errno == EINTR);
		if (got <= 0)
			return CURL_READFUNC_ABORT;
	}
	x->body_left -= got;
	return (size_t)got;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct exchange *x = ud;
	(void)a, (void)b, (void)c, (void)d;
	return atomic_load(&x->g->stopping) ? 1 : 0;
}

static void set_request(struct exchange *x, CURL *c, char *url)
{
	const ah_gateway *g = x->g;
	long long left = g->deadline_ms - mono_ms();
	snprintf(url, 2048, "%s%s", g->upstream, x->target);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(left > 1 ? left : 1));
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, x->hdrs);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
	if (strcmp(x->method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body_left);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, x);
	} else if (strcmp(x->method, "DELETE") == 0) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
	}
}

/* Forwards the request with the real key in place of the token. */
static void forward(struct exchange *x)
{
	char kh[KEY_MAX + 16], url[2048];
	/* No key configured: none is sent, and the provider says so. */
	snprintf(kh, sizeof kh, *x->g->key ? "x-api-key: %s" : "X-No-Model-Key: 1", x->g->key);
	struct curl_slist *l = curl_slist_append(x->hdrs, kh);
	sodium_memzero(kh, sizeof kh);
	CURL *c = l ? curl_easy_init() : NULL;
	if (l)
		x->hdrs = curl_slist_append(l, "Expect:");
	if (!c || !x->hdrs) {
		send_error(x->fd, 500, "api_error", "model gateway: out of memory");
		if (c)
			curl_easy_cleanup(c);
		return;
	}
	set_request(x, c, url);
	CURLcode rc = curl_easy_perform(c);
	if (rc == CURLE_OK && !x->head_sent)
		send_head(x);
	else if (rc != CURLE_OK && !x->head_sent)
		send_error(x->fd, rc == CURLE_OPERATION_TIMEDOUT ? 504 : 502, "api_error",
		           "model gateway: the provider could not be reached");
	x->usage.requests = 1;
	ah_gw_meter_finish(x->meter, &x->usage);
	x->meter = NULL;
	curl_easy_cleanup(c);
}

/* The path for a log line: no query, printable only, short. */
static void log_path(char *out, size_t cap, const char *target)
{
	size_t i = 0;
	for (; i + 1 < cap && target[i] && target[i] != '?'; i++)
		out[i] = target[i] > ' ' && target[i] < 127 ? target[i] : '?';
	out[i] = '\0';
}

/* After a refusal sent before the request body was read: closing with unread
 * data would reset the connection and could destroy the answer on its way, so
 * the rest is read and dropped (costing no memory) until the agent closes. */
static void drain(int fd)
{
	char buf[16384];
	shutdown(fd, SHUT_WR);
	for (long long total = 0; total < (256LL << 20);) {
		ssize_t n = recv(fd, buf, sizeof buf, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		total += n;
	}
}

static void serve(struct exchange *x)
{
	int rc = read_head(x);
	if (rc != 0) {
		if (rc == AH_ETOOBIG) {
			send_error(x->fd, 431, "invalid_request_error", "request head too large");
			drain(x->fd);
		}
		return;
	}
	int bad = parse_head(x);
	if (bad == 0 && !token_ok(x->g, x->token))
		bad = 401;
	if (bad == 0 && x->content_length > (long long)x->g->max_body)
		bad = 413;
	if (bad) {
		send_error(x->fd, bad, bad == 401 ? "authentication_error" : "invalid_request_error",
		           bad == 401 ? "invalid model gateway token" : "request refused by the model gateway");
		if (atomic_fetch_add(&x->g->refused, 1) < LOG_REFUSED)
			ah_log_warn("%s model gateway: request refused (%d)", x->g->tag, bad);
		drain(x->fd);
		return;
	}
	x->body_off = x->head_len;
	x->body_left = x->content_length > 0 ? x->content_length : 0;
	forward(x);
	if (x->body_left > 0) /* the provider answered before taking it all */
		drain(x->fd);
	char path[100];
	log_path(path, sizeof path, x->target);
	ah_log_info("%s model gateway: %s %s -> %ld (%lld in, %lld out)", x->g->tag, x->method, path,
	            x->status, x->usage.input_tokens, x->usage.output_tokens);
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
		g->usage.requests += x->usage.requests;
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
	const char *u = ah_cfg_str(cfg, AH_CFG_MODEL_GATEWAY_UPSTREAM);
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

int ah_gateway_start(ah_gateway **out, const ah_config *cfg, int listen_fd, const char *key,
                     const char *token, const char *tag, int timeout_ms, ah_err *err)
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
	g->deadline_ms = mono_ms() + timeout_ms;
	g->max_body = (size_t)ah_cfg_int(cfg, AH_CFG_MODEL_GATEWAY_MAX_BODY_BYTES);
	int rc = upstream_from(g, cfg, err);
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
	if (usage)
		*usage = g->usage;
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
