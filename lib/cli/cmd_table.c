/* Every command table, in the order --help lists them. A new command group
 * (files, buckets, mounts, agents files, ...) is one file ending in its table
 * of rows (see struct ah_cli_cmd in cli.h) and two lines here. */
#include "cli/cli.h"

extern const struct ah_cli_cmd ah_cli_auth_cmds[], ah_cli_init_cmds[], ah_cli_deploy_cmds[],
	ah_cli_invoke_cmds[], ah_cli_agents_cmds[], ah_cli_secrets_cmds[], ah_cli_sessions_cmds[],
	ah_cli_keys_cmds[], ah_cli_usage_cmds[], ah_cli_files_cmds[], ah_cli_attach_cmds[];
extern const struct ah_cli_cmd ah_cli_buckets_cmds[], ah_cli_mounts_cmds[];
extern const struct ah_cli_cmd ah_cli_deploys_cmds[];
extern const struct ah_cli_cmd ah_cli_logs_cmds[];
extern const struct ah_cli_cmd ah_cli_invocations_cmds[];
extern const struct ah_cli_cmd ah_cli_schedules_cmds[];
extern const struct ah_cli_cmd ah_cli_webhooks_cmds[];

const struct ah_cli_cmd *const ah_cli_tables[] = {
	ah_cli_auth_cmds,
	ah_cli_init_cmds,
	ah_cli_deploy_cmds,
	ah_cli_deploys_cmds,
	ah_cli_invoke_cmds,
	ah_cli_invocations_cmds,
	ah_cli_agents_cmds,
	ah_cli_attach_cmds,
	ah_cli_secrets_cmds,
	ah_cli_sessions_cmds,
	ah_cli_logs_cmds,
	ah_cli_schedules_cmds,
	ah_cli_webhooks_cmds,
	ah_cli_files_cmds,
	ah_cli_keys_cmds,
	ah_cli_usage_cmds,
	ah_cli_buckets_cmds,
	ah_cli_mounts_cmds,
	NULL,
};
