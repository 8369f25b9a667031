/* A command under a bucket mount's connection check (lib/runner/fuse_guard.c),
 * for test_rclone_guard.py: the same filter and supervisor the runner puts
 * around rclone, with a policy from the command line.
 *
 *   rclone_guard ALLOW_HOSTS ENDPOINT CMD [ARGS...]
 *
 * ALLOW_HOSTS is a storage_allow_hosts value, ENDPOINT the bucket's
 * endpoint_url. Exit: the command's status; 125 when the guard cannot start
 * (with the message), 2 on misuse. */
#include "runner/fuse_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: rclone_guard ALLOW_HOSTS ENDPOINT CMD [ARGS...]\n");
		return 2;
	}
	ah_addr_policy pol = {.allow_hosts = argv[1]};
	json_object *e = json_object_new_object();
	json_object_object_add(e, "endpoint", json_object_new_string(argv[2]));
	struct ah_fuse_guard *g = NULL;
	ah_err err = {0};
	int sv[2];
	if (ah_fuse_guard_new(&g, e, &pol, "rclone_guard", &err) != 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		fprintf(stderr, "rclone_guard: %s\n", err.msg[0] ? err.msg : strerror(errno));
		return 125;
	}
	pid_t pid = fork();
	if (pid == 0) {
		if (ah_fuse_guard_child(sv[1]) != 0)
			_exit(125);
		execvp(argv[3], argv + 3);
		_exit(127);
	}
	close(sv[1]);
	if (pid < 0 || ah_fuse_guard_start(g, sv[0], &err) != 0) {
		fprintf(stderr, "rclone_guard: %s\n", err.msg);
		return 125;
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	ah_fuse_guard_free(g);
	json_object_put(e);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
