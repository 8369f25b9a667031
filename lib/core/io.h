/* Sockets: the one poll-then-read loop against a deadline that every protocol
 * reader here (runner requests and answers, the TCP handshake and its sealed
 * frames) builds on, writing all of a buffer (to a socket or a file), and
 * host:port addresses. */
#ifndef AH_CORE_IO_H
#define AH_CORE_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reads at most n bytes, waiting no later than deadline (ah_now_ms() clock).
 * Returns the count (> 0), 0 at end of file, AH_ETIMEOUT, or AH_EFAIL.
 * Interrupted calls are retried. */
ssize_t ah_read_until(int fd, void *buf, size_t n, int64_t deadline);

/* Writes all n bytes to a socket, retrying on EINTR, never raising SIGPIPE;
 * AH_EFAIL when the peer went away. */
int ah_send_all(int fd, const void *p, size_t n);

/* Writes all n bytes to a file or pipe, retrying on EINTR; AH_EFAIL (errno
 * set) when a write fails. */
int ah_write_all(int fd, const void *p, size_t n);

/* "host:port" or "[v6]:port" split; AH_EINVALID when malformed or too long. */
int ah_hostport_split(const char *s, char *host, size_t hcap, char *port, size_t pcap);

#endif
