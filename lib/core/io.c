/* See io.h. */
#include "core/io.h"
#include "core/err.h"
#include "core/util.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

ssize_t ah_read_until(int fd, void *buf, size_t n, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - ah_now_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (left <= 0)
			return AH_ETIMEOUT;
		int pr = poll(&p, 1, (int)left);
		if (pr == 0)
			return AH_ETIMEOUT;
		if (pr < 0 && errno != EINTR)
			return AH_EFAIL;
		if (pr < 0)
			continue;
		ssize_t got = read(fd, buf, n);
		if (got < 0 && errno == EINTR)
			continue;
		return got < 0 ? AH_EFAIL : got;
	}
}

int ah_send_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return AH_EFAIL;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

int ah_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return AH_EFAIL;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

int ah_hostport_split(const char *s, char *host, size_t hcap, char *port, size_t pcap)
{
	const char *colon, *h = s;
	size_t hl;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':')
			return AH_EINVALID;
		h = s + 1;
		hl = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || memchr(s, ':', (size_t)(colon - s)))
			return AH_EINVALID; /* a bare IPv6 address needs brackets */
		hl = (size_t)(colon - s);
	}
	size_t pl = strlen(colon + 1);
	if (hl == 0 || hl >= hcap || pl == 0 || pl >= pcap || strspn(colon + 1, "0123456789") != pl)
		return AH_EINVALID;
	memcpy(host, h, hl);
	host[hl] = '\0';
	memcpy(port, colon + 1, pl + 1);
	return 0;
}
