/* See runner_client.h. */
#include "runner_client/runner_client.h"
#include "rpc/rpc.h"
#include "runner_client/stream.h"
#include "core/io.h"
#include "core/json.h"
#include "core/log.h"
#include "core/util.h"
#include "core/settings.h"
#include "db/db.h"

#include <errno.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_ANSWER AH_RC_MAX_ANSWER

#define SQL_AGENT_RUNNER \
	"SELECT r.id, r.address FROM agents a JOIN runners r ON r.id = a.runner_id WHERE a.id = ?"
#define SQL_RUNNER "SELECT id, address FROM runners WHERE id = ?"

/* This host's runner id, worked out once per worker (workers are
 * single-threaded), or again while runner_socket's directory is missing. */
static const char *local_id(const ah_rc *r)
{
	static char id[80];
	static bool known;
	if (!known)
		known = ah_runner_local_id(r->cfg, id, sizeof id) == 0;
	return id;
}

/* The runner that holds the agent's sandboxes (and its sessions'): the one
 * that deployed it. This host's own runner is reached on runner_socket, with
 * no lookup when the request names it (runner_id, from the agent's row);
 * another one at the address it registered (looked up by the runner_id the
 * request names, else by its agent_id). Without either, a runner yet, or a
 * working lookup: runner_socket. */
static const char *runner_address(const ah_rc *r, json_object *req)
{
	const char *local = ah_settings_of(r->cfg)->runner.socket;
	const char *named = ah_json_get_str(req, "runner_id");
	const char *agent = ah_json_get_str(req, "agent_id");
	ah_rows rows;
	if (named && strcmp(named, local_id(r)) == 0)
		return local;
	if (!r->db || (!agent && !named))
		return local;
	if (ah_db_query(r->db, r->arena, &rows, named ? SQL_RUNNER : SQL_AGENT_RUNNER, "s",
	                named ? named : agent) != 0) {
		ah_log_warn("agent=%s: runner lookup failed (%s); using %s", agent, ah_db_error(r->db),
		            local);
		return local;
	}
	if (rows.n != 1 || !rows.v[0][1] || !*rows.v[0][1] || strcmp(rows.v[0][0], local_id(r)) == 0)
		return local;
	return rows.v[0][1];
}

static void put_json(void *o)
{
	json_object_put(o);
}

/* o is put when the caller's arena goes. */
static json_object *own(const ah_rc *r, json_object *o)
{
	if (o)
		ah_arena_on_cleanup(r->arena, put_json, o);
	return o;
}

/* key: val, or null when val is NULL (as the API's ah_json_str). */
static void put_str(json_object *o, const char *key, const char *val)
{
	json_object_object_add(o, key, val ? json_object_new_string(val) : NULL);
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

/* The key of runner_secret(_file), derived once per worker process (workers
 * are single-threaded). NULL when none is configured or it is unusable. */
static const ah_rauth_key *shared_key(const ah_rc *r)
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

/* Reads until the newline that ends the answer, the deadline, or the cap. */
static int read_answer(const ah_rc *r, int fd, int timeout_ms, char **out, size_t *outlen)
{
	size_t cap = 64 * 1024, len = 0;
	char *buf = ah_alloc(r->arena, cap);
	int64_t deadline = ah_now_ms() + timeout_ms;
	for (;;) {
		if (len + 1 >= cap) {
			if (cap >= MAX_ANSWER)
				return AH_EFAIL;
			char *nb = ah_alloc(r->arena, cap * 4);
			memcpy(nb, buf, len);
			buf = nb;
			cap *= 4;
		}
		ssize_t n = ah_read_until(fd, buf + len, cap - len - 1, deadline);
		if (n == AH_ETIMEOUT)
			return AH_ETIMEOUT;
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

static bool is_unix(const char *address)
{
	return address[0] == '/' || address[0] == '.' || !strchr(address, ':');
}

/* How long a refused send waits for the answer the runner wrote before it
 * closed: already there, or none will come. */
#define SENT_REFUSED_MS 200

/* The unix socket: the request line in clear, the answer line back. */
typedef struct chunk_sink {
	ah_runner_chunk_fn fn;
	void *ctx;
} chunk_sink;

static int call_unix(const ah_rc *r, const char *path, const char *s, size_t len, int timeout_ms,
                     const chunk_sink *k, char **ans, size_t *alen)
{
	int fd = connect_unix(path);
	if (fd < 0)
		return AH_EBUSY; /* nothing sent */
	/* The line and its end in one send: sent apart, the runner could wake
	 * for the first part, find no end of line and sleep again. */
	char *line = ah_alloc(r->arena, len + 1);
	memcpy(line, s, len);
	line[len] = '\n';
	int rc = ah_send_all(fd, line, len + 1);
	if (rc == 0)
		rc = k->fn ? ah_rc_stream_unix(r, fd, timeout_ms, k->fn, k->ctx, ans, alen)
		           : read_answer(r, fd, timeout_ms, ans, alen);
	/* A runner with no connection thread free answers "overloaded" and
	 * closes at once, without reading the request: when it got there before
	 * the request was sent, the send fails (EPIPE) and the answer is still
	 * there to read. Read, the call is told to come back (503), not that the
	 * runner is gone (a full run met it once). */
	else if (read_answer(r, fd, SENT_REFUSED_MS, ans, alen) == 0)
		rc = 0;
	close(fd);
	return rc;
}

/* TCP: handshake, then the request and the answer sealed (frames, rpc/rpc.h). The
 * answer is copied into the arena so both paths hand back the same thing. */
static int call_tcp(const ah_rc *r, const char *address, const char *s, size_t len, int timeout_ms,
                    const chunk_sink *k, char **ans, size_t *alen)
{
	const ah_rauth_key *key = shared_key(r);
	ah_rwire w;
	ah_err err = {0};
	unsigned char *m = NULL;
	if (!key) {
		ah_log_error("cannot reach the runner at %s: no usable runner secret", address);
		return AH_EFAIL;
	}
	int rc = ah_rwire_dial(&w, address, key, &err);
	if (rc != 0) {
		ah_log_error("runner at %s: %s", address, err.msg);
		return AH_EBUSY; /* the request was not sent */
	}
	if (!k->fn)
		rc = ah_rwire_exchange(&w, s, len, timeout_ms, &m, alen, &err);
	else if ((rc = ah_rwire_send(&w, s, len, true, &err)) == 0)
		rc = ah_rc_stream_tcp(&w, timeout_ms, k->fn, k->ctx, &m, alen, &err);
	close(w.fd);
	ah_rwire_wipe(&w);
	if (rc != 0) {
		ah_log_error("runner at %s: %s", address, err.msg);
		return rc == AH_ETIMEOUT ? AH_ETIMEOUT : AH_EFAIL;
	}
	*ans = ah_alloc(r->arena, *alen + 1);
	memcpy(*ans, m, *alen + 1);
	free(m);
	return 0;
}

int ah_rc_call(const ah_rc *r, json_object *req, json_object **resp, int timeout_ms)
{
	return ah_rc_call_stream(r, req, resp, timeout_ms, NULL, NULL);
}

int ah_rc_call_stream(const ah_rc *r, json_object *req, json_object **resp, int timeout_ms,
                      ah_runner_chunk_fn fn, void *ctx)
{
	chunk_sink k = {fn, ctx};
	*resp = NULL;
	/* The runner's log lines for this request carry nginx's id too. */
	if (r->request_id && !json_object_object_get_ex(req, "request_id", NULL))
		json_object_object_add(req, "request_id", json_object_new_string(r->request_id));
	const char *address = runner_address(r, req);
	size_t len, alen = 0;
	const char *s = json_object_to_json_string_length(req, JSON_C_TO_STRING_PLAIN, &len);
	char *answer = NULL;
	int rc = is_unix(address) ? call_unix(r, address, s, len, timeout_ms, &k, &answer, &alen)
	                          : call_tcp(r, address, s, len, timeout_ms, &k, &answer, &alen);
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
	*resp = own(r, o);
	return 0;
}

int ah_rc_destroy_agent(const ah_rc *r, const char *agent_id)
{
	return ah_rc_forget_agent(r, agent_id, NULL, false);
}

int ah_rc_forget_agent(const ah_rc *r, const char *agent_id, const char *runner_id, bool purge)
{
	return ah_rc_left_image(r, agent_id, runner_id, purge, NULL);
}

int ah_rc_left_image(const ah_rc *r, const char *agent_id, const char *runner_id, bool purge,
                         const char *left_image)
{
	json_object *req = own(r, json_object_new_object());
	put_str(req, "op", "destroy_agent");
	put_str(req, "agent_id", agent_id);
	if (left_image && *left_image)
		put_str(req, "retire_image", left_image);
	if (runner_id && *runner_id)
		put_str(req, "runner_id", runner_id);
	if (purge)
		json_object_object_add(req, "purge", json_object_new_boolean(1));
	json_object *resp, *ok;
	if (ah_rc_call(r, req, &resp, 30000) != 0)
		return AH_EFAIL;
	if (!json_object_object_get_ex(resp, "ok", &ok) || !json_object_get_boolean(ok))
		return AH_EFAIL;
	return 0;
}

int ah_rc_retire_warm(const ah_rc *r, const char *agent_id, const char *runner_id)
{
	json_object *req = own(r, json_object_new_object());
	put_str(req, "op", "retire_warm");
	put_str(req, "agent_id", agent_id);
	if (runner_id && *runner_id)
		put_str(req, "runner_id", runner_id);
	json_object *resp, *ok;
	if (ah_rc_call(r, req, &resp, 5000) != 0 ||
	    !json_object_object_get_ex(resp, "ok", &ok) || !json_object_get_boolean(ok)) {
		ah_log_warn("agent=%s: the runner did not confirm its warm processes are retired "
		            "(its next call still checks them)", agent_id);
		return AH_EFAIL;
	}
	return 0;
}
