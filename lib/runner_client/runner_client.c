/* See runner_client.h. */
#include "runner_client/runner_client.h"
#include "core/log.h"
#include "core/util.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_ANSWER (64 * 1024 * 1024) /* base64 of a 10 MB output plus slack */

static int connect_runner(ah_req *r)
{
	const char *path = ah_config_get(r->cfg, "runner_socket", "var/run/runner.sock");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		ah_log_error("cannot reach the runner at %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
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
	int fd = connect_runner(r);
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
