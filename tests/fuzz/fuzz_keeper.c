/* Fuzz target: the messages between the runner and the processes inside a
 * sandbox (lib/sandbox/wire.c's sb_recv over a real SOCK_SEQPACKET pair, then
 * lib/sandbox/msg.c), as each reader takes them: the spawner reading EXEC
 * (argv, envp, working directory), the keeper reading MOUNT_BIND (a path), and
 * the runner reading an answer (ERROR's text). Input: one byte of settings
 * (the reader; how many descriptors ride along), then the datagram.
 * Properties: every string handed on lies inside the body and ends in it; a
 * bind path is absolute and fits; no received descriptor is left open. */
#include "sandbox/internal.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static char body[SB_MSG_MAX];

static void send_raw(int fd, const uint8_t *data, size_t len, int nfds)
{
	int fds[3];
	for (int i = 0; i < nfds; i++)
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int) * 3)]; } c;
	struct iovec iov = { (void *)data, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
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
	if (sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && len > 0 && len < 32768)
		__builtin_trap(); /* a datagram this small always fits the socket */
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
}

static void inside(const char *s, const char *lo, size_t n)
{
	if (s < lo || s >= lo + n || !memchr(s, '\0', (size_t)(lo + n - s)))
		__builtin_trap();
}

static void spawner_reads(sb_msg *m, size_t blen, int nfds)
{
	static char *argv[SB_EXEC_ARGS_MAX], *envp[SB_EXEC_ARGS_MAX];
	if (m->op != SB_EXEC || nfds != 3 || sb_exec_parse(m, body, blen, argv, envp) < 0)
		return;
	for (int i = 0; i < m->argc; i++)
		inside(argv[i], body, blen);
	for (int i = 0; i < m->envc; i++)
		inside(envp[i], body, blen);
	if (argv[m->argc] || envp[m->envc] || strlen(m->msg) >= sizeof m->msg)
		__builtin_trap();
}

static void keeper_reads(const sb_msg *m, size_t blen)
{
	char path[SB_BIND_PATH_MAX];
	if (m->op != SB_MOUNT_BIND || sb_bind_path(body, blen, path) < 0)
		return;
	if (path[0] != '/' || strlen(path) >= sizeof path)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536)
		return 0;
	int reader = data[0] % 3, nfds = (data[0] >> 2) % 4, sv[2];
	/* Which of the numbers this input's descriptors will take are open now. */
	int lowest = dup(0);
	close(lowest);
	bool open_before[16];
	for (int i = 0; i < 16; i++)
		open_before[i] = fcntl(lowest + i, F_GETFD) >= 0;
	/* Non-blocking: a datagram the kernel refused must not leave the read waiting. */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
		return 0;
	send_raw(sv[0], data + 1, size - 1, nfds);
	sb_msg m;
	size_t blen = 0;
	int fds[3], got = 0;
	size_t cap = reader == 0 ? sizeof body : reader == 1 ? 256 : 0;
	int rc = sb_recv(sv[1], &m, cap ? body : NULL, cap, cap ? &blen : NULL, fds, &got);
	if (rc == 1) {
		if (reader == 0)
			spawner_reads(&m, blen, got);
		else if (reader == 1)
			keeper_reads(&m, blen);
		else if (m.op == SB_ERROR)
			m.msg[sizeof m.msg - 1] = '\0';
	}
	for (int i = 0; i < got; i++)
		close(fds[i]);
	close(sv[0]);
	close(sv[1]);
	/* Everything this input opened came from the lowest free numbers on. */
	for (int i = 0; i < 16; i++)
		if (!open_before[i] && fcntl(lowest + i, F_GETFD) >= 0)
			__builtin_trap(); /* sb_recv left a descriptor open */
	return 0;
}
