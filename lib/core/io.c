/* See io.h. */
#include "core/io.h"
#include "core/err.h"
#include "core/util.h"

#include <errno.h>
#include <poll.h>
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
