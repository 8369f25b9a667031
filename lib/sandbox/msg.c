/* The bodies of the runner's requests inside a sandbox: EXEC's argv and envp
 * (for the spawner) and MOUNT_BIND's path (for the keeper). Separate from
 * inside.c so that tests/fuzz/fuzz_keeper.c parses them exactly as the keeper
 * does. Runs inside: no malloc, no stdio. */
#include "sandbox/internal.h"

#include <errno.h>
#include <string.h>

int sb_exec_parse(sb_msg *m, char *body, size_t blen, char **argv, char **envp)
{
	char *p = body, *end = body + blen;
	if (m->argc < 1 || m->argc >= SB_EXEC_ARGS_MAX || m->envc < 0 || m->envc >= SB_EXEC_ARGS_MAX)
		return -1;
	for (int i = 0; i < m->argc + m->envc; i++) {
		char *z = memchr(p, '\0', (size_t)(end - p));
		if (!z)
			return -1;
		if (i < m->argc)
			argv[i] = p;
		else
			envp[i - m->argc] = p;
		p = z + 1;
	}
	argv[m->argc] = NULL;
	envp[m->envc] = NULL;
	m->msg[sizeof m->msg - 1] = '\0'; /* the working directory */
	return 0;
}

int sb_bind_path(const char *body, size_t blen, char out[SB_BIND_PATH_MAX])
{
	if (blen < 2 || blen > SB_BIND_PATH_MAX || body[blen - 1] != '\0' || body[0] != '/' ||
	    strlen(body) != blen - 1) {
		errno = EINVAL;
		return -1;
	}
	memcpy(out, body, blen);
	return 0;
}
