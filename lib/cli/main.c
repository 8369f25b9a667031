/* agenthost: the command-line client. main finds the command the leading words
 * name, parses its options, loads the configuration and runs it; one error line
 * and an exit status (0 ok, 1 API error, 2 usage, 3 network) come out of one
 * place, ah_cli_fail. */
#include "cli/cli.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"

#define DEFAULT_MAX_WAIT 120

static void setup(struct ah_cli *c)
{
	const char *nc = getenv("NO_COLOR"), *w = getenv("AGENTHOST_RATE_WAIT");
	long long n;
	c->a = ah_arena_new();
	c->tty_in = isatty(STDIN_FILENO);
	c->tty_out = isatty(STDOUT_FILENO);
	c->tty_err = isatty(STDERR_FILENO);
	/* NO_COLOR (no-color.org): present and not empty turns colour off. */
	bool colour = !(nc && *nc);
	c->color_out = colour && c->tty_out;
	c->color_err = colour && c->tty_err;
	c->max_wait = w && ah_parse_ll(&n, w) == 0 && n >= 0 && n <= 3600 ? (int)n : DEFAULT_MAX_WAIT;
	c->curl = curl_easy_init();
}

/* The command line before the command's words: global options only. */
static int leading_opts(struct ah_cli *c, int argc, char **argv, int *i, ah_err *err)
{
	for (; *i < argc && argv[*i][0] == '-'; ++*i) {
		int rc;
		if (!strcmp(argv[*i], "--help") || !strcmp(argv[*i], "-h")) {
			ah_cli_help_all(stdout, NULL);
			return AH_EDONE;
		}
		if (!strcmp(argv[*i], "--version")) {
			puts("agenthost " AH_CLI_VERSION);
			return AH_EDONE;
		}
		if (!ah_cli_global_opt(c, argc, argv, i, &rc, err))
			return ah_cli_usage(err, "unknown option %s (agenthost --help lists the commands)", argv[*i]);
		if (rc)
			return rc;
	}
	return 0;
}

/* No command matched: the group's commands when the words name a group. */
static int unknown_command(int argc, char **argv, ah_err *err)
{
	if (!argc) {
		ah_cli_help_all(stderr, NULL);
		return ah_cli_usage(err, "no command given");
	}
	for (int t = 0; ah_cli_tables[t]; t++)
		for (const struct ah_cli_cmd *k = ah_cli_tables[t]; k->words; k++)
			if (!strncmp(k->words, argv[0], strlen(argv[0])) && k->words[strlen(argv[0])] == ' ') {
				bool help = argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
				ah_cli_help_all(help ? stdout : stderr, argv[0]);
				return help ? AH_EDONE
				            : ah_cli_usage(err, "%s: which one? (%s)", argv[0],
				                           argc > 1 ? "unknown subcommand" : "subcommand missing");
			}
	return ah_cli_usage(err, "unknown command \"%s\" (agenthost --help lists the commands)", argv[0]);
}

static int run(struct ah_cli *c, int argc, char **argv, ah_err *err)
{
	int i = 0, used;
	int rc = leading_opts(c, argc, argv, &i, err);
	if (rc)
		return rc;
	if (i < argc && !strcmp(argv[i], "__complete")) {
		ah_cli_complete(argc - i - 1, argv + i + 1);
		return AH_EDONE;
	}
	const struct ah_cli_cmd *cmd = ah_cli_find(argv + i, argc - i, &used);
	if (!cmd)
		return unknown_command(argc - i, argv + i, err);
	struct ah_cli_args a;
	rc = ah_cli_parse(c, cmd, argc - i - used, argv + i + used, &a, err);
	if (!rc)
		rc = ah_cli_config_load(c, err);
	if (!rc && !cmd->no_auth && !c->key)
		rc = ah_cli_usage(err, "not logged in: run agenthost login (or set AGENTHOST_API_KEY)");
	return rc ? rc : cmd->run(c, &a, err);
}

int main(int argc, char **argv)
{
	struct ah_cli c = {0};
	ah_err err = {0};
	curl_global_init(CURL_GLOBAL_DEFAULT);
	setup(&c);
	int rc = c.curl ? run(&c, argc - 1, argv + 1, &err)
	                : ah_err_set(&err, AH_EFAIL, "cannot start libcurl");
	int status = rc == 0 || rc == AH_EDONE ? AH_CLI_EXIT_OK : ah_cli_fail(&c, &err);
	fflush(stdout);
	if (c.curl)
		curl_easy_cleanup(c.curl);
	ah_arena_destroy(c.a);
	curl_global_cleanup();
	return status;
}
