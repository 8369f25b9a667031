/* ah_git_clone from the command line, for test_git_clone.py: the URL policy is
 * skipped on purpose, so the test can show that the isolated network alone
 * keeps a clone from reaching the host's own services.
 *
 *   git_clone isolated|host URL DEST
 *
 * Config as the runner's (AGENTHOST_CONFIG, AGENTHOST_<KEY>). Prints the
 * error message on failure; exit 0 on success, 1 on failure, 2 on misuse. */
#include "core/config.h"
#include "deploy/deploy.h"
#include "sandbox/sandbox.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[1], "isolated") != 0 && strcmp(argv[1], "host") != 0)) {
		fprintf(stderr, "usage: git_clone isolated|host URL DEST\n");
		return 2;
	}
	ah_config *cfg = NULL;
	ah_err err = {0};
	if (ah_config_load(&cfg, NULL, &err) != 0 || ah_sandbox_init(&ah_settings_of(cfg)->sandbox, &err) != 0) {
		fprintf(stderr, "git_clone: %s\n", err.msg);
		ah_config_free(cfg);
		return 1;
	}
	struct ah_git_opts opts = {
		.max_bytes = 1 << 20,
		/* Tests wait for this driver: 5 s unless configured (at most 60). */
		.timeout_seconds = ah_cfg_is_set(cfg, AH_CFG_GIT_TIMEOUT_SECONDS)
		                       ? (int)ah_cfg_int(cfg, AH_CFG_GIT_TIMEOUT_SECONDS) : 5,
	};
	enum ah_git_net net = argv[1][0] == 'i' ? AH_GIT_NET_ISOLATED : AH_GIT_NET_HOST;
	int rc = ah_git_clone(argv[2], NULL, argv[3], &opts, net, &err);
	if (rc != 0)
		printf("%s\n", err.msg);
	ah_sandbox_shutdown();
	ah_config_free(cfg);
	return rc ? 1 : 0;
}
