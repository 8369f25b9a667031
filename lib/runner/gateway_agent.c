/* The model gateway, the agent's side: the request head as the agent sends
 * it, checked and parsed, and the gateway's own answers. See gateway_int.h. */
#include "runner/gateway_int.h"

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

/* ---- talking to the agent ---- */

int gw_send_all(int fd, const char *p, size_t len)
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
void gw_send_error(int fd, int status, const char *type, const char *msg)
{
	char body[512], head[256];
	int bn = snprintf(body, sizeof body,
	                  "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":\"%s\"}}",
	                  type, msg);
	int hn = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
	                  "Content-Length: %d\r\nConnection: close\r\n\r\n", status,
	                  status < 300 ? "OK" : "Error", bn);
	if (gw_send_all(fd, head, (size_t)hn) == 0)
		gw_send_all(fd, body, (size_t)bn);
}

/* Reads until the end of the request head. */
int gw_read_head(struct exchange *x)
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

bool gw_hop_by_hop(const char *name)
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

/* A header value: visible characters, spaces and tabs, nothing that could
 * end a line (a lone CR or LF would start a header of the agent's making on
 * the provider's side) or that a server may read differently. */
static bool value_ok(const char *v)
{
	for (; *v; v++)
		if (((unsigned char)*v < ' ' && *v != '\t') || *v == 127)
			return false;
	return true;
}

/* One request header: noted when it matters here, forwarded unless it is
 * hop-by-hop or a credential (the client's token never goes upstream). The
 * name must be a token (RFC 9110): no space before the colon, no folded
 * line, nothing the provider's server could parse as another name. */
static int take_header(struct exchange *x, char *line)
{
	char *colon = strchr(line, ':');
	if (!colon || colon == line)
		return AH_EINVALID;
	for (char *c = line; c < colon; c++)
		if (!gw_tchar((unsigned char)*c))
			return AH_EINVALID;
	*colon = '\0';
	char *v = colon + 1;
	v += strspn(v, " \t");
	if (!value_ok(v))
		return AH_EINVALID;
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
	if (gw_hop_by_hop(line))
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

/* A request target: visible ASCII only, no fragment. */
static bool target_ok(const char *t)
{
	for (; *t; t++)
		if (*t <= ' ' || *t >= 127 || *t == '#')
			return false;
	return true;
}

/* "METHOD /v1/... HTTP/1.x" and the headers; 0, or the status to answer.
 * Which endpoints pass is the policy's (gw_policy_route), not this. */
int gw_parse_head(struct exchange *x)
{
	char *p = x->in, *line = next_line(&p);
	char *sp1 = line ? strchr(line, ' ') : NULL, *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp2 || (strcmp(sp2 + 1, "HTTP/1.1") != 0 && strcmp(sp2 + 1, "HTTP/1.0") != 0))
		return 400;
	*sp1 = *sp2 = '\0';
	x->method = line;
	x->target = sp1 + 1;
	x->content_length = -1;
	for (char *m = line; *m; m++)
		if (!gw_tchar((unsigned char)*m))
			return 400;
	if (!*x->method || !target_ok(x->target))
		return 400;
	while ((line = next_line(&p)) != NULL)
		if (take_header(x, line) != 0)
			return 400;
	if (strcmp(x->method, "GET") && strcmp(x->method, "POST") && strcmp(x->method, "DELETE"))
		return 405;
	if (strncmp(x->target, "/v1/", 4) != 0 || strstr(x->target, ".."))
		return 404;
	return x->chunked ? 411 : 0;
}

/* From now on every request of this invocation is refused; the first reason
 * is the one recorded. */
void gw_end_access(ah_gateway *g, const char *why)
{
	pthread_mutex_lock(&g->mu);
	if (!atomic_load(&g->ended)) {
		snprintf(g->ended_why, sizeof g->ended_why, "%s", why);
		atomic_store(&g->ended, 1);
	}
	pthread_mutex_unlock(&g->mu);
	ah_log_warn("%s model gateway: model access ended: %s", g->tag, why);
}

bool gw_token_ok(const ah_gateway *g, const char *t)
{
	return t && strlen(t) == AH_GATEWAY_TOKEN_LEN &&
	       sodium_memcmp(t, g->token, AH_GATEWAY_TOKEN_LEN) == 0;
}

/* The path for a log line: no query, printable only, short. */
void gw_log_path(char *out, size_t cap, const char *target)
{
	size_t i = 0;
	for (; i + 1 < cap && target[i] && target[i] != '?'; i++)
		out[i] = target[i] > ' ' && target[i] < 127 ? target[i] : '?';
	out[i] = '\0';
}

/* After a refusal sent before the request body was read: closing with unread
 * data would reset the connection and could destroy the answer on its way, so
 * the rest is read and dropped (costing no memory) until the agent closes. */
void gw_drain(int fd)
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
