/* Resource limits set on each program just before exec.
 *
 * The cgroup caps the sandbox as a whole; these cap one process: open files
 * (RLIMIT_NOFILE), file size (no single file larger than the disk), no core
 * dumps (they would land in /app and could hold secrets from the environment).
 * RLIMIT_NPROC counts per host uid, and each slot has its own host uid, so it
 * is a second fork-bomb stop next to pids.max. Runs inside: no malloc. */
#include "sandbox/internal.h"

#include <sys/resource.h>

static int cap(int res, rlim_t v)
{
	struct rlimit r = { v, v };
	return setrlimit(res, &r);
}

int sb_rlimits_apply(int nofile, int nproc, long long fsize)
{
	if (cap(RLIMIT_CORE, 0) < 0)
		return -1;
	if (nofile > 0 && cap(RLIMIT_NOFILE, (rlim_t)nofile) < 0)
		return -1;
	if (nproc > 0 && cap(RLIMIT_NPROC, (rlim_t)nproc) < 0)
		return -1;
	if (fsize > 0 && cap(RLIMIT_FSIZE, (rlim_t)fsize) < 0)
		return -1;
	return 0;
}
