/* See stream.h. */
#include "runner_client/stream.h"
#include "core/io.h"
#include "core/log.h"
#include "core/util.h"

#include <errno.h>
#include <poll.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define TICK_MS 1000
static const char CHUNK_HEAD[] = "{\"chunk_b64\":\"";
#define HEAD_LEN (sizeof CHUNK_HEAD - 1)

/* A chunk message is handed to fn and true returned; anything else is the
 * answer. A chunk that is not base64 is dropped (logged): the answer still
 * holds the whole output. */
static bool chunk_of(const char *msg, size_t len, ah_runner_chunk_fn fn, void *ctx)
{
	if (len < HEAD_LEN + 2 || memcmp(msg, CHUNK_HEAD, HEAD_LEN) != 0)
		return false;
	const char *b64 = msg + HEAD_LEN;
	size_t blen = len - HEAD_LEN - 2, n = 0;
	unsigned char *bin = malloc(blen / 4 * 3 + 4);
	if (bin && sodium_base642bin(bin, blen / 4 * 3 + 4, b64, blen, NULL, &n, NULL,
	                             sodium_base64_VARIANT_ORIGINAL) == 0)
		fn(ctx, (const char *)bin, n);
	else
		ah_log_error("runner sent a chunk that is not base64; dropped");
	free(bin);
	return true;
}

/* The complete lines in buf: chunks to fn; the answer (non-chunk) ends it. */
static bool take_lines(const ah_rc *r, char *buf, size_t *len, ah_runner_chunk_fn fn, void *ctx,
                       char **out, size_t *outlen)
{
	size_t start = 0;
	char *nl;
	while ((nl = memchr(buf + start, '\n', *len - start))) {
		size_t l = (size_t)(nl - (buf + start));
		if (!chunk_of(buf + start, l, fn, ctx)) {
			*out = ah_alloc(r->arena, l + 1);
			memcpy(*out, buf + start, l);
			(*out)[l] = '\0';
			*outlen = l;
			return true;
		}
		start += l + 1;
	}
	memmove(buf, buf + start, *len - start);
	*len -= start;
	return false;
}

int ah_rc_stream_unix(const ah_rc *r, int fd, int timeout_ms, ah_runner_chunk_fn fn, void *ctx,
                      char **out, size_t *outlen)
{
	size_t cap = 64 * 1024, len = 0;
	char *buf = malloc(cap);
	int64_t deadline = ah_now_ms() + timeout_ms;
	int rc = AH_EFAIL;
	while (buf) {
		if (take_lines(r, buf, &len, fn, ctx, out, outlen)) {
			rc = 0;
			break;
		}
		if (len + 1 >= cap) {
			char *nb = cap >= AH_RC_MAX_ANSWER ? NULL : realloc(buf, cap * 4);
			if (!nb)
				break;
			buf = nb;
			cap *= 4;
		}
		int64_t now = ah_now_ms();
		if (now >= deadline) {
			rc = AH_ETIMEOUT;
			break;
		}
		ssize_t n = ah_read_until(fd, buf + len, cap - len - 1,
		                          deadline - now > TICK_MS ? now + TICK_MS : deadline);
		if (n == AH_ETIMEOUT) {
			fn(ctx, NULL, 0);
			continue;
		}
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	free(buf);
	return rc;
}

int ah_rc_stream_tcp(ah_rwire *w, int timeout_ms, ah_runner_chunk_fn fn, void *ctx,
                     unsigned char **ans, size_t *alen, ah_err *err)
{
	int64_t deadline = ah_now_ms() + timeout_ms;
	for (;;) {
		int64_t now = ah_now_ms();
		if (now >= deadline)
			return ah_err_set(err, AH_ETIMEOUT, "no answer in time");
		struct pollfd p = {.fd = w->fd, .events = POLLIN};
		int n = poll(&p, 1, (int)(deadline - now > TICK_MS ? TICK_MS : deadline - now));
		if (n == 0)
			fn(ctx, NULL, 0);
		if (n <= 0)
			continue;
		unsigned char *m = NULL;
		size_t l = 0;
		int rc = ah_rwire_recv(w, AH_RWIRE_MAX_FRAME, deadline, &m, &l, err);
		if (rc != 0)
			return rc;
		if (w->rx_ended) {
			*ans = m;
			*alen = l;
			return 0;
		}
		bool chunk = chunk_of((const char *)m, l, fn, ctx);
		free(m);
		if (!chunk)
			return ah_err_set(err, AH_EINVALID, "a message before the answer is not a chunk");
	}
}
