/* The wire between the runner and the processes inside a sandbox (messages on
 * SOCK_SEQPACKET, descriptors by SCM_RIGHTS; internal.h has the format), and
 * the one-line file write both sides use for /proc and cgroup files. Linked
 * into the runner and into agenthost-keeper: system calls, stack buffers and
 * snprintf only. */
#include "sandbox/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int sb_send(int fd, const sb_msg *m, const void *body, size_t blen, const int *fds, int nfds)
{
	struct iovec iov[2] = { { (void *)m, sizeof *m }, { (void *)body, blen } };
	union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int) * 4)]; } c;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = blen ? 2 : 1 };
	if (nfds > 0) {
		memset(&c, 0, sizeof c);
		mh.msg_control = c.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(h), fds, sizeof(int) * (size_t)nfds);
	}
	ssize_t n;
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)(sizeof *m + blen) ? 0 : -1;
}

/* A datagram larger than its socket's send buffer is refused (EMSGSIZE), and
 * the default buffer (net.core.wmem_default, 208 KiB) is smaller than an
 * exec request may be. The kernel doubles what is asked, within twice
 * net.core.wmem_max (208 KiB by default): room enough, no privilege. */
int sb_fit_send_buffer(int fd)
{
	int want = (int)(sizeof(sb_msg) + SB_MSG_MAX + 4096);
	return setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof want);
}

int sb_recv(int fd, sb_msg *m, void *body, size_t bcap, size_t *blen, int *fds, int *nfds)
{
	struct iovec iov[2] = { { m, sizeof *m }, { body, bcap } };
	union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int) * 4)]; } c;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = body ? 2 : 1,
	                     .msg_control = c.b, .msg_controllen = sizeof c.b };
	if (nfds)
		*nfds = 0;
	ssize_t n;
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	/* A datagram of no bytes (or end of file) may still carry descriptors:
	 * they are closed below, never handed out, never left open. */
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int got[4];
		memcpy(got, CMSG_DATA(h), sizeof(int) * (size_t)(k > 4 ? 4 : k));
		for (int i = 0; i < k && i < 4; i++) {
			if (n > 0 && fds && nfds && *nfds < 3)
				fds[(*nfds)++] = got[i];
			else
				close(got[i]);
		}
	}
	if (n == 0)
		return 0;
	if (n < (ssize_t)sizeof *m || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		errno = EPROTO;
		return -1;
	}
	if (blen)
		*blen = (size_t)n - sizeof *m;
	return 1;
}

int sb_error_reply(int fd, int err, const char *what)
{
	sb_msg m = { .op = SB_ERROR, .err = err };
	snprintf(m.msg, sizeof m.msg, "%s: %s", what, strerror(err));
	return sb_send(fd, &m, NULL, 0, NULL, 0);
}

int sb_write_file(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, data, strlen(data));
	int e = errno;
	close(fd);
	errno = e;
	return n == (ssize_t)strlen(data) ? 0 : -1;
}
