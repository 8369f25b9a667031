/* See runner_client.h. */
#include "runner_client/runner_client.h"
#include "runner_client/auth.h"
#include "core/log.h"
#include "core/util.h"
#include "db/db.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_ANSWER (64 * 1024 * 1024) /* base64 of a 10 MB output plus slack */

#define CONNECT_TIMEOUT_MS 5000
#define SQL_AGENT_RUNNER \
	"SELECT r.address FROM agents a JOIN runners r ON r.id = a.runner_id WHERE a.id = ?"

/* The runner that holds the agent's sandboxes (and its sessions'): the one
 * that deployed it, at the address it registered. Without an agent_id in the
 * request, a runner yet, or a working lookup: the configured socket. */
static const char *runner_address(ah_req *r, json_object *req)
{
	const char *fallback = ah_config_get(r->cfg, "runner_socket", "var/run/runner.sock");
	json_object *id = NULL;
	ah_rows rows;
	if (!r->db || !json_object_object_get_ex(req, "agent_id", &id) ||
	    !json_object_is_type(id, json_type_string))
		return fallback;
	if (ah_db_query(r->db, r->arena, &rows, SQL_AGENT_RUNNER, "s", json_object_get_string(id)) != 0) {
		ah_log_warn("agent=%s: runner lookup failed (%s); using %s", json_object_get_string(id),
		            ah_db_error(r->db), fallback);
		return fallback;
	}
	if (rows.n != 1 || !rows.v[0][0] || !*rows.v[0][0])
		return fallback;
	return rows.v[0][0];
}

static int connect_unix(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		ah_log_error("runner socket path too long: %s", path);
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		ah_log_error("cannot reach the runner at %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Non-blocking connect bounded by CONNECT_TIMEOUT_MS, so a dead host does not
 * hold the worker for the kernel's minutes of SYN retries. */
static int connect_addr(const struct addrinfo *ai)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), e = 0;
	socklen_t el = sizeof e;
	if (fd < 0)
		return -1;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		if (errno != EINPROGRESS || poll(&p, 1, CONNECT_TIMEOUT_MS) != 1 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0 || e != 0) {
			close(fd);
			errno = e ? e : ETIMEDOUT;
			return -1;
		}
	}
	int one = 1, fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

/* The key of runner_secret(_file), derived once per worker process (workers
 * are single-threaded). NULL when none is configured or it is unusable. */
static const ah_rauth_key *shared_key(ah_req *r)
{
	static ah_rauth_key key;
	static int state; /* 0 not yet loaded, 1 loaded, -1 unusable */
	ah_err err = {0};
	if (state == 0) {
		state = ah_rauth_key_load(&key, r->cfg, &err) == 0 ? 1 : -1;
		if (state < 0)
			ah_log_error("runner over TCP impossible: %s", err.msg);
	}
	return state > 0 ? &key : NULL;
}

static int connect_tcp(ah_req *r, const char *address)
{
	char host[256], port[16];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res = NULL;
	const ah_rauth_key *key = shared_key(r);
	ah_err err = {0};
	int fd = -1;
	if (!key || ah_hostport_split(address, host, sizeof host, port, sizeof port) != 0 ||
	    getaddrinfo(host, port, &hints, &res) != 0) {
		ah_log_error("cannot reach the runner at %s: %s", address,
		             key ? "bad or unresolvable address" : "no usable runner secret");
		return -1;
	}
	for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next)
		fd = connect_addr(ai);
	freeaddrinfo(res);
	if (fd < 0) {
		ah_log_error("cannot reach the runner at %s: %s", address, strerror(errno));
		return -1;
	}
	if (ah_rauth_client(fd, key, &err) != 0) {
		ah_log_error("runner at %s: handshake failed: %s", address, err.msg);
		close(fd);
		return -1;
	}
	return fd;
}

static int connect_runner(ah_req *r, json_object *req)
{
	const char *address = runner_address(r, req);
	return address[0] == '/' || address[0] == '.' || !strchr(address, ':')
	       ? connect_unix(address) : connect_tcp(r, address);
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return AH_EFAIL;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads until the newline that ends the answer, the deadline, or the cap. */
static int read_answer(ah_req *r, int fd, int timeout_ms, char **out, size_t *outlen)
{
	size_t cap = 64 * 1024, len = 0;
	char *buf = ah_alloc(r->arena, cap);
	int64_t deadline = ah_now_ms() + timeout_ms;
	for (;;) {
		int left = (int)(deadline - ah_now_ms());
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, left) == 0)
			return AH_ETIMEOUT;
		if (len + 1 >= cap) {
			if (cap >= MAX_ANSWER)
				return AH_EFAIL;
			char *nb = ah_alloc(r->arena, cap * 4);
			memcpy(nb, buf, len);
			buf = nb;
			cap *= 4;
		}
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (buf[len - 1] == '\n')
			break;
	}
	buf[len] = '\0';
	*out = buf;
	*outlen = len;
	return len ? 0 : AH_EFAIL;
}

int ah_runner_call(ah_req *r, json_object *req, json_object **resp, int timeout_ms)
{
	*resp = NULL;
	int fd = connect_runner(r, req);
	if (fd < 0)
		return AH_EFAIL;
	size_t len;
	const char *s = json_object_to_json_string_length(req, JSON_C_TO_STRING_PLAIN, &len);
	char *answer = NULL;
	size_t alen = 0;
	int rc = write_all(fd, s, len);
	if (rc == 0)
		rc = write_all(fd, "\n", 1);
	if (rc == 0)
		rc = read_answer(r, fd, timeout_ms, &answer, &alen);
	close(fd);
	if (rc != 0)
		return rc;
	json_tokener *tok = json_tokener_new_ex(64);
	json_object *o = json_tokener_parse_ex(tok, answer, (int)alen);
	json_tokener_free(tok);
	if (!o || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		ah_log_error("runner answered something that is not a JSON object");
		return AH_EFAIL;
	}
	*resp = ah_json_own(r, o);
	return 0;
}

int ah_runner_destroy_agent(ah_req *r, const char *agent_id)
{
	json_object *req = ah_json_own(r, json_object_new_object());
	ah_json_str(req, "op", "destroy_agent");
	ah_json_str(req, "agent_id", agent_id);
	json_object *resp, *ok;
	if (ah_runner_call(r, req, &resp, 30000) != 0)
		return AH_EFAIL;
	if (!json_object_object_get_ex(resp, "ok", &ok) || !json_object_get_boolean(ok))
		return AH_EFAIL;
	return 0;
}
