/* Reading a socket against a deadline: the one poll-then-read loop every
 * protocol reader here (runner requests and answers, the TCP handshake and its
 * sealed frames) builds on. */
#ifndef AH_CORE_IO_H
#define AH_CORE_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reads at most n bytes, waiting no later than deadline (ah_now_ms() clock).
 * Returns the count (> 0), 0 at end of file, AH_ETIMEOUT, or AH_EFAIL.
 * Interrupted calls are retried. */
ssize_t ah_read_until(int fd, void *buf, size_t n, int64_t deadline);

#endif
