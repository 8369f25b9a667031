/* The id of this host's own runner, computed the same way by the runner (which
 * registers under it) and by the API workers (which recognise it): the
 * configured runner_id, else the host name plus a hash of the absolute
 * runner_socket path. Two runners on one host differ; a restarted runner is
 * the same one. An agent held by this id is reached through runner_socket,
 * never through the TCP address it also advertises: no handshake, no
 * sealing, no address lookup. */
#include "rpc/rpc.h"
#include "core/settings.h"

#include <libgen.h>
#include <stdbool.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ah_runner_local_id(const ah_config *cfg, char *out, size_t n)
{
	const char *id = ah_set_opt(ah_settings_of(cfg)->runner.id);
	const char *sock = ah_settings_of(cfg)->runner.socket;
	char dir[PATH_MAX], base[PATH_MAX], real[PATH_MAX], path[2 * PATH_MAX + 2];
	char host[65] = "runner";
	uint32_t h = 2166136261u;
	if (id && *id) {
		snprintf(out, n, "%.64s", id);
		return 0;
	}
	snprintf(dir, sizeof dir, "%s", sock);
	snprintf(base, sizeof base, "%s", sock);
	bool resolved = realpath(dirname(dir), real) != NULL;
	if (resolved)
		snprintf(path, sizeof path, "%s/%s", real, basename(base));
	else
		snprintf(path, sizeof path, "%s", sock);
	gethostname(host, sizeof host - 1);
	for (const char *p = path; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	snprintf(out, n, "%.55s-%08x", host, h);
	return resolved ? 0 : -1;
}
