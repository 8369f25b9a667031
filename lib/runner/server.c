/* The runner's socket (docs/runner-protocol.md): one JSON request line per
 * connection, one JSON answer line, then close. Each connection gets a short
 * thread; `run` requests additionally take one of `capacity` slots so at most
 * that many programs run at once.
 *
 * The socket is a unix socket on the host's file system with mode 0660; a
 * sandbox has its own mount namespace without it and its own network namespace,
 * so no sandbox can reach it. With runner_listen set, the same requests are
 * also taken over TCP, each connection only after the shared-secret handshake
 * (tcp.c), and then with the request and the answer each one sealed frame
 * (rpc/rpc.h, frames) instead of a line. Requests carry secrets (the env
 * of `run`): env is never logged, and the copies are wiped after use. */
#include "runner/runner.h"
#include "rpc/rpc.h"
#include "core/io.h"
#include "runner/sandboxes.h"
#include "runner/ops.h"
#include "runner/cancel.h"
#include "runner/run_req.h"
#include "core/json.h"
#include "core/log.h"
#include "core/util.h"
#include "deploy/deploy.h"

#include <errno.h>
#include <grp.h>
#include <json-c/json.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_REQUEST (48 << 20)   /* a base64 prompt of up to ~36 MB */
#define READ_TIMEOUT_MS 30000
#define MAX_CONNECTIONS 256

static struct ah_runner *runner;
static int listen_fd = -1;
static pthread_mutex_t conn_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t conn_cv = PTHREAD_COND_INITIALIZER;
static int connections;

static int socket_group(const char *path, const char *group, ah_err *err)
{
	struct group gr, *res = NULL;
	char buf[4096];
	if (getgrnam_r(group, &gr, buf, sizeof(buf), &res) != 0 || !res)
		return ah_err_set(err, AH_EFAIL, "runner_socket_group %s: no such group", group);
	if (chown(path, (uid_t)-1, gr.gr_gid) != 0)
		return ah_err_set(err, AH_EFAIL, "chown %s: %s", path, strerror(errno));
	return 0;
}

/* Whether a runner answers a ping on the socket. Connecting is not enough:
 * the listening socket of a runner that was just killed can outlive it for a
 * moment (a child cloned from it that has not yet closed what it inherited),
 * and takes connections that nobody will answer. */
static bool runner_answers(const struct sockaddr_un *sa)
{
	static const char ping[] = "{\"op\":\"ping\"}\n";
	char buf[256];
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool live = fd >= 0 && connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 &&
	            ah_send_all(fd, ping, sizeof(ping) - 1) == 0 &&
	            ah_read_until(fd, buf, sizeof(buf), ah_now_ms() + 2000) > 0;
	if (fd >= 0)
		close(fd);
	return live;
}

int ah_server_listen(struct ah_runner *r, ah_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	runner = r;
	if (strlen(r->socket_path) >= sizeof(sa.sun_path))
		return ah_err_set(err, AH_EFAIL, "socket path too long: %s", r->socket_path);
	memcpy(sa.sun_path, r->socket_path, strlen(r->socket_path) + 1);
	/* A socket left by a killed runner is removed; one that answers belongs to a
	 * live runner, and two runners on one socket would share an id. */
	if (lstat(r->socket_path, &st) == 0 && S_ISSOCK(st.st_mode)) {
		if (runner_answers(&sa))
			return ah_err_set(err, AH_ECONFLICT, "another runner is listening on %s",
			                  r->socket_path);
		unlink(r->socket_path);
	}
	listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	mode_t old = umask(0117); /* born 0660: never briefly world-connectable */
	int b = listen_fd < 0 ? -1 : bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (b != 0 || listen(listen_fd, 128) != 0)
		return ah_err_set(err, AH_EFAIL, "cannot listen on %s: %s", r->socket_path,
		                  strerror(errno));
	if (chmod(r->socket_path, 0660) != 0)
		return ah_err_set(err, AH_EFAIL, "chmod %s: %s", r->socket_path, strerror(errno));
	const char *group = ah_settings_of(r->cfg)->runner.socket_group; /* "": unchanged */
	int rc = *group ? socket_group(r->socket_path, group, err) : 0;
	return rc ? rc : ah_tcp_listen(r, err);
}

/* Reads one request line within the deadline; malloc'ed, NUL-terminated. */
static char *read_request(int fd, size_t *len)
{
	size_t cap = 64 * 1024, n = 0;
	char *buf = malloc(cap);
	int64_t deadline = ah_now_ms() + READ_TIMEOUT_MS;
	while (buf) {
		if (n + 1 >= cap) {
			char *nb = cap >= MAX_REQUEST ? NULL : realloc(buf, cap * 4);
			if (!nb)
				break;
			buf = nb;
			cap *= 4;
		}
		ssize_t got = ah_read_until(fd, buf + n, cap - n - 1, deadline);
		if (got <= 0)
			break;
		char *nl = memchr(buf + n, '\n', (size_t)got);
		n += (size_t)got;
		if (nl) {
			*len = (size_t)(nl - buf);
			buf[*len] = '\0';
			return buf;
		}
	}
	free(buf);
	return NULL;
}

static void release_slot(void)
{
	pthread_mutex_lock(&conn_mu);
	connections--;
	pthread_cond_broadcast(&conn_cv);
	pthread_mutex_unlock(&conn_mu);
}

static void write_answer(int fd, json_object *ans)
{
	size_t len;
	const char *s = json_object_to_json_string_length(ans, JSON_C_TO_STRING_PLAIN, &len);
	struct iovec iov[2] = {{(void *)s, len}, {"\n", 1}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
	while (iov[0].iov_len + iov[1].iov_len > 0) {
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		for (int i = 0; i < 2 && w > 0; i++) {
			size_t k = (size_t)w < iov[i].iov_len ? (size_t)w : iov[i].iov_len;
			iov[i].iov_base = (char *)iov[i].iov_base + k;
			iov[i].iov_len -= k;
			w -= (ssize_t)k;
		}
		mh.msg_iov = iov[0].iov_len ? iov : iov + 1;
		mh.msg_iovlen = iov[0].iov_len ? 2 : 1;
	}
}

static json_object *dispatch(json_object *req, ah_op_after *after)
{
	json_object *op = NULL;
	const char *name = json_object_object_get_ex(req, "op", &op) ? json_object_get_string(op) : NULL;
	if (!name)
		return ah_op_error(AH_RPC_INVALID, "missing \"op\"");
	/* A request that names its runner must have reached that one: an agent's
	 * sandboxes and image live on the runner that deployed it. */
	json_object *to = NULL;
	if (json_object_object_get_ex(req, "runner_id", &to) && to &&
	    strcmp(json_object_get_string(to), runner->id) != 0)
		return ah_op_error(AH_RPC_ELSEWHERE, "request meant for another runner");
	if (strcmp(name, "ping") == 0)
		return ah_op_ping(runner, req);
	if (strcmp(name, "run") == 0)
		return ah_op_run(runner, req, after);
	if (strcmp(name, "destroy_session") == 0)
		return ah_op_destroy_session(req);
	if (strcmp(name, "destroy_agent") == 0)
		return ah_op_destroy_agent(runner, req);
	if (strcmp(name, "retire_warm") == 0)
		return ah_op_retire_warm(req);
	if (strcmp(name, "cancel") == 0)
		return ah_op_cancel(req);
	return ah_op_error(AH_RPC_INVALID, "unknown op");
}

/* TCP: the answer as the one sealed frame of the runner's direction. */
static void write_sealed(ah_rwire *w, json_object *ans)
{
	size_t len;
	ah_err err = {0};
	const char *s = json_object_to_json_string_length(ans, JSON_C_TO_STRING_PLAIN, &len);
	if (ah_rwire_send(w, s, len, true, &err) != 0)
		ah_log_warn("tcp answer not sent: %s", err.msg);
}

/* Parses and runs one request; the raw copy is wiped (it may hold secrets). */
static json_object *answer(char *line, size_t len, ah_op_after *after)
{
	json_object *req = NULL, *ans;
	bool had_line = line != NULL;
	if (line) {
		json_tokener *tok = json_tokener_new_ex(32);
		req = tok ? json_tokener_parse_ex(tok, line, (int)len) : NULL;
		json_tokener_free(tok);
		explicit_bzero(line, len);
		free(line);
	}
	if (!req || !json_object_is_type(req, json_type_object)) {
		ans = ah_op_error(AH_RPC_INVALID, had_line ? "request is not a JSON object" : "no request line");
	} else {
		/* The API's request id (nginx's $request_id) on this thread's log
		 * lines until the request is done (serve_*). */
		const char *id = ah_json_get_str(req, "request_id");
		ah_log_set_request_id(ah_run_token_ok(id, 64, "_-") ? id : NULL);
		ans = dispatch(req, after);
	}
	json_object_put(req);
	return ans;
}

/* A streamed run's chunk on the unix socket: one line before the answer's. */
static __thread bool unix_gone; /* the API's end closed: the run goes on */

static void chunk_unix(void *conn, const char *msg, size_t len)
{
	int fd = (int)(intptr_t)conn;
	if (unix_gone)
		return;
	if (ah_send_all(fd, msg, len) != 0 || ah_send_all(fd, "\n", 1) != 0) {
		ah_log_warn("a chunk of a streamed run not sent: the API is gone");
		unix_gone = true;
	}
}

/* Over TCP: a sealed frame not marked final. */
static void chunk_tcp(void *conn, const char *msg, size_t len)
{
	ah_err err = {0};
	ah_rwire *w = conn;
	if (!w->broken && ah_rwire_send(w, msg, len, false, &err) != 0)
		ah_log_warn("a chunk of a streamed run not sent: %s", err.msg);
}

static void serve_unix(int fd)
{
	size_t len = 0;
	char *line = read_request(fd, &len);
	ah_op_after after = {0};
	unix_gone = false;
	ah_run_chunk_sink(chunk_unix, (void *)(intptr_t)fd);
	json_object *ans = answer(line, len, &after);
	write_answer(fd, ans);
	json_object_put(ans);
	ah_op_finish(&after);
	ah_log_set_request_id(NULL);
}

/* Over TCP no intact request means a broken link or tampering: no answer. */
static void serve_tcp(int fd)
{
	ah_rwire wire;
	size_t len = 0;
	if (!ah_tcp_admit(fd, &wire))
		return;
	char *line = ah_tcp_read_request(&wire, MAX_REQUEST, READ_TIMEOUT_MS, &len);
	if (line) {
		ah_op_after after = {0};
		ah_run_chunk_sink(chunk_tcp, &wire);
		json_object *ans = answer(line, len, &after);
		write_sealed(&wire, ans);
		json_object_put(ans);
		ah_op_finish(&after);
		ah_log_set_request_id(NULL);
	}
	ah_rwire_wipe(&wire);
}

/* arg: the fd shifted left once, the low bit set for a TCP connection. */
static void *connection(void *arg)
{
	int fd = (int)((intptr_t)arg >> 1);
	if ((intptr_t)arg & 1)
		serve_tcp(fd);
	else
		serve_unix(fd);
	close(fd);
	release_slot();
	return NULL;
}

static void spawn(int fd, bool tcp)
{
	pthread_attr_t at;
	pthread_t t;
	pthread_mutex_lock(&conn_mu);
	bool full = connections >= MAX_CONNECTIONS;
	if (!full)
		connections++;
	pthread_mutex_unlock(&conn_mu);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	void *arg = (void *)(((intptr_t)fd << 1) | (tcp ? 1 : 0));
	if (full || pthread_create(&t, &at, connection, arg) != 0) {
		/* Not over TCP: an unauthenticated peer learns nothing, not even load. */
		if (!tcp) {
			json_object *ans = ah_op_busy(AH_RPC_OVERLOADED, "runner overloaded");
			write_answer(fd, ans);
			json_object_put(ans);
		}
		close(fd);
		if (!full)
			release_slot();
	}
	pthread_attr_destroy(&at);
}

void *ah_server_thread(void *arg)
{
	struct ah_runner *r = arg;
	ah_log_info("listening on %s", r->socket_path);
	/* ah_tcp_fd() is -1 when TCP is off, and poll ignores negative fds. */
	struct pollfd p[2] = {{.fd = listen_fd, .events = POLLIN}, {.fd = ah_tcp_fd(), .events = POLLIN}};
	while (!r->stopping) {
		if (poll(p, 2, 200) <= 0)
			continue;
		for (int i = 0; i < 2; i++) {
			int fd = p[i].revents & POLLIN ? accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC) : -1;
			if (fd >= 0)
				spawn(fd, i == 1);
		}
	}
	close(listen_fd);
	listen_fd = -1;
	ah_tcp_close();
	unlink(r->socket_path);
	return NULL;
}

void ah_server_stop(int grace_ms)
{
	int64_t deadline = ah_now_ms() + grace_ms;
	pthread_mutex_lock(&conn_mu);
	while (connections > 0 && ah_now_ms() < deadline) {
		struct timespec ts = ah_deadline_in_ms(1000);
		pthread_cond_timedwait(&conn_cv, &conn_mu, &ts);
	}
	if (connections > 0)
		ah_log_warn("%d connection(s) still running at shutdown", connections);
	pthread_mutex_unlock(&conn_mu);
}
