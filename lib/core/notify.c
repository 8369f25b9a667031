/* See notify.h. The protocol is one datagram on a unix socket, whose name
 * starts with '@' for the abstract namespace; libsystemd is not needed for
 * that. */
#include "core/notify.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

void ah_notify_ready(void)
{
	static const char msg[] = "READY=1";
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t n = path ? strlen(path) : 0;
	if (n < 2 || n >= sizeof sa.sun_path || (path[0] != '/' && path[0] != '@'))
		return;
	memcpy(sa.sun_path, path, n);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0';
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		(void)!sendto(fd, msg, sizeof msg - 1, MSG_NOSIGNAL, (struct sockaddr *)&sa,
		              (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n));
		close(fd);
	}
	unsetenv("NOTIFY_SOCKET");
}
