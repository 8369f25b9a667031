/* The command line: finding the command that the leading words name, parsing
 * its options from its table row, and --help and completion generated from the
 * same rows, so that what a command accepts and what it says it accepts cannot
 * drift apart. */
#include "cli/cli.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/nearest.h"
#include "core/util.h"

int ah_cli_usage(ah_err *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err->code = AH_CLI_EUSAGE;
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return AH_CLI_EUSAGE;
}

/* How many of words' space-separated words argv starts with (all or 0). */
static int words_match(const char *words, char **argv, int argc)
{
	int n = 0;
	const char *w = words;
	while (*w) {
		size_t len = strcspn(w, " ");
		if (n >= argc || strlen(argv[n]) != len || strncmp(argv[n], w, len) != 0)
			return 0;
		n++;
		w += len;
		w += *w == ' ';
	}
	return n;
}

const struct ah_cli_cmd *ah_cli_find(char **argv, int argc, int *used)
{
	const struct ah_cli_cmd *best = NULL;
	*used = 0;
	for (int t = 0; ah_cli_tables[t]; t++)
		for (const struct ah_cli_cmd *cmd = ah_cli_tables[t]; cmd->words; cmd++) {
			int n = words_match(cmd->words, argv, argc);
			if (n > *used) {
				*used = n;
				best = cmd;
			}
		}
	return best;
}

static int find_opt(const struct ah_cli_cmd *cmd, const char *arg, size_t len)
{
	for (int i = 0; i < AH_CLI_MAX_OPTS && cmd->opts[i].name; i++) {
		const struct ah_cli_opt *o = &cmd->opts[i];
		if (len == 1 ? o->shortname == arg[0]
		             : strlen(o->name) == len && strncmp(o->name, arg, len) == 0)
			return i;
	}
	return -1;
}

bool ah_cli_global_opt(struct ah_cli *c, int argc, char **argv, int *i, int *rc, ah_err *err)
{
	const char *s = argv[*i];
	*rc = 0;
	if (strcmp(s, "--json") == 0) {
		c->json = true;
		return true;
	}
	if (strncmp(s, "--url=", 6) == 0) {
		c->url_flag = s + 6;
		return true;
	}
	if (strcmp(s, "--url") == 0) {
		if (*i + 1 >= argc)
			*rc = ah_cli_usage(err, "--url needs a value");
		else
			c->url_flag = argv[++*i];
		return true;
	}
	return false;
}

const struct ah_cli_opt *ah_cli_opt_nearest(const struct ah_cli_cmd *cmd, const char *name, size_t len)
{
	const struct ah_cli_opt *best = NULL;
	size_t best_d = len > 4 ? 3 : 2;   /* beyond that it is another word, not a typo */
	char typed[64];
	if (len >= sizeof(typed))
		return NULL;
	memcpy(typed, name, len);   /* name may go on with "=value" */
	typed[len] = 0;
	for (int i = 0; i < AH_CLI_MAX_OPTS && cmd->opts[i].name; i++) {
		size_t d = ah_edit_distance(cmd->opts[i].name, typed);
		/* A prefix ("--desc") is nearer than its distance says. */
		if (len >= 3 && strncmp(cmd->opts[i].name, name, len) == 0)
			d = 1;
		if (d < best_d) {
			best_d = d;
			best = &cmd->opts[i];
		}
	}
	return best;
}

static int unknown_opt(const struct ah_cli_cmd *cmd, const char *s, const char *name, size_t len, ah_err *err)
{
	const struct ah_cli_opt *near = s[1] == '-' ? ah_cli_opt_nearest(cmd, name, len) : NULL;
	if (near)
		return ah_cli_usage(err, "%s: unknown option %s (did you mean --%s?)", cmd->words, s, near->name);
	return ah_cli_usage(err, "%s: unknown option %s (see agenthost %s --help)", cmd->words, s, cmd->words);
}

/* Stores v (NULL for a flag) into the member that row o fills. */
static int store(const struct ah_cli_cmd *cmd, const struct ah_cli_opt *o, const char *v, void *opts,
                 ah_err *err)
{
	char *dst = (char *)opts + o->off;
	long long n;
	switch (o->kind) {
	case AH_CLI_OPT_BOOL:
		*(bool *)dst = true;
		return 0;
	case AH_CLI_OPT_STRING:
		*(const char **)dst = v;
		return 0;
	case AH_CLI_OPT_INT:
		if (ah_parse_ll(&n, v) != 0 || n < o->lo || n > o->hi)
			return ah_cli_usage(err, "--%s: expected a whole number from %lld to %lld, got \"%s\"",
			                    o->name, o->lo, o->hi, v);
		*(struct ah_cli_int *)dst = (struct ah_cli_int){.set = true, .n = n};
		return 0;
	}
	return ah_cli_usage(err, "%s: --%s has no kind (a bad table row)", cmd->words, o->name);
}

/* One option at argv[*i] ("--name", "--name=v", "--name v", "-n v"). */
static int parse_opt(struct ah_cli *c, const struct ah_cli_cmd *cmd, int argc, char **argv,
                     int *i, void *opts, ah_err *err)
{
	const char *s = argv[*i];
	bool is_long = s[1] == '-';
	const char *name = s + (is_long ? 2 : 1);
	const char *eq = is_long ? strchr(name, '=') : NULL;
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	int rc;
	if (ah_cli_global_opt(c, argc, argv, i, &rc, err))
		return rc;
	int k = (is_long || len == 1) ? find_opt(cmd, name, len) : -1;
	if (k < 0 || (len == 1 && is_long))
		return unknown_opt(cmd, s, name, len, err);
	const struct ah_cli_opt *o = &cmd->opts[k];
	if (!o->arg) {
		if (eq)
			return ah_cli_usage(err, "%s: --%s takes no value", cmd->words, o->name);
		return store(cmd, o, NULL, opts, err);
	}
	if (eq)
		return store(cmd, o, eq + 1, opts, err);
	if (*i + 1 >= argc)
		return ah_cli_usage(err, "%s: %s needs a value (%s)", cmd->words, s, o->arg);
	return store(cmd, o, argv[++*i], opts, err);
}

static bool is_help(const char *s)
{
	return strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0;
}

int ah_cli_parse(struct ah_cli *c, const struct ah_cli_cmd *cmd, int argc, char **argv,
                 struct ah_cli_args *out, ah_err *err)
{
	memset(out, 0, sizeof(*out));
	out->cmd = cmd;
	out->pos = ah_alloc(c->a, sizeof(char *) * (size_t)(argc + 1));
	void *opts = ah_alloc(c->a, cmd->opts_size ? cmd->opts_size : 1);
	memset(opts, 0, cmd->opts_size ? cmd->opts_size : 1);
	out->opts = opts;
	bool opts_done = false;
	for (int i = 0; i < argc; i++) {
		const char *s = argv[i];
		if (!opts_done && is_help(s)) {
			ah_cli_help(stdout, cmd);
			return AH_EDONE;
		}
		if (!opts_done && strcmp(s, "--") == 0) {
			opts_done = true;
		} else if (!opts_done && s[0] == '-' && s[1]) {
			int rc = parse_opt(c, cmd, argc, argv, &i, opts, err);
			if (rc)
				return rc;
		} else {
			out->pos[out->npos++] = argv[i];
		}
	}
	if (out->npos < cmd->min_pos || (cmd->max_pos >= 0 && out->npos > cmd->max_pos))
		return ah_cli_usage(err, "usage: agenthost %s %s", cmd->words, cmd->args ? cmd->args : "");
	return 0;
}

void ah_cli_help(FILE *f, const struct ah_cli_cmd *cmd)
{
	fprintf(f, "usage: agenthost %s%s%s [options]\n\n%s\n\noptions:\n", cmd->words,
	        cmd->args ? " " : "", cmd->args ? cmd->args : "", cmd->summary);
	for (int i = 0; i < AH_CLI_MAX_OPTS && cmd->opts[i].name; i++) {
		const struct ah_cli_opt *o = &cmd->opts[i];
		char left[64], shortpart[8] = "";
		if (o->shortname)
			snprintf(shortpart, sizeof(shortpart), "-%c, ", o->shortname);
		snprintf(left, sizeof(left), "%s--%s%s%s", shortpart, o->name, o->arg ? " " : "",
		         o->arg ? o->arg : "");
		fprintf(f, "  %-26s %s\n", left, o->help);
	}
	fprintf(f, "  %-26s %s\n  %-26s %s\n  %-26s %s\n", "--json", "print the API's JSON",
	        "--url URL", "API base URL (overrides AGENTHOST_URL and the config file)",
	        "-h, --help", "this help");
}

/* Every command whose words start with prefix (all when prefix is NULL). */
void ah_cli_help_all(FILE *f, const char *prefix)
{
	size_t plen = prefix ? strlen(prefix) : 0;
	fputs("usage: agenthost COMMAND [options]   (agenthost COMMAND --help for more)\n\n", f);
	for (int t = 0; ah_cli_tables[t]; t++)
		for (const struct ah_cli_cmd *cmd = ah_cli_tables[t]; cmd->words; cmd++) {
			if (prefix && (strncmp(cmd->words, prefix, plen) != 0 ||
			               (cmd->words[plen] && cmd->words[plen] != ' ')))
				continue;
			char left[80];
			snprintf(left, sizeof(left), "%s %s", cmd->words, cmd->args ? cmd->args : "");
			fprintf(f, "  %-36s %s\n", left, cmd->summary);
		}
	fputs("\nglobal options: --json, --url URL, -h/--help\n"
	      "exit status: 0 ok, 1 API error, 2 usage, 3 network\n", f);
}

/* The word of words after its first n words, as a length (0: none). */
static size_t next_word(const char *words, char **argv, int n, const char **start)
{
	const char *w = words;
	for (int k = 0; k < n; k++) {
		size_t len = strcspn(w, " ");
		if (strlen(argv[k]) != len || strncmp(argv[k], w, len) != 0 || !w[len])
			return 0;
		w += len + 1;
	}
	*start = w;
	return strcspn(w, " ");
}

/* True when an earlier row already offered this next word. */
static bool offered(const struct ah_cli_cmd *upto, int t_upto, char **argv, int n, const char *w, size_t len)
{
	for (int t = 0; t <= t_upto; t++)
		for (const struct ah_cli_cmd *k = ah_cli_tables[t]; k->words && k != upto; k++) {
			const char *s;
			if (next_word(k->words, argv, n, &s) == len && strncmp(s, w, len) == 0)
				return true;
		}
	return false;
}

/* For bash completion: what may follow argv, one a line: a matched command's
 * options, else the next command words. */
void ah_cli_complete(int argc, char **argv)
{
	int used;
	const struct ah_cli_cmd *cmd = ah_cli_find(argv, argc, &used);
	if (cmd) {
		for (int i = 0; i < AH_CLI_MAX_OPTS && cmd->opts[i].name; i++)
			printf("--%s\n", cmd->opts[i].name);
		puts("--json\n--help");
		return;
	}
	for (int t = 0; ah_cli_tables[t]; t++)
		for (const struct ah_cli_cmd *k = ah_cli_tables[t]; k->words; k++) {
			const char *w;
			size_t len = next_word(k->words, argv, argc, &w);
			if (len && !offered(k, t, argv, argc, w, len))
				printf("%.*s\n", (int)len, w);
		}
}
