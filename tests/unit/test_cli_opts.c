/* Unit test of the command-line client's typed options (lib/cli/args.c), as
 * TAP: a command line fills the members its rows name, with their types (a
 * flag, a string, "" for --name=, a number in its range); a bad value, a value
 * given to a flag and an unknown option are usage errors, the last naming the
 * nearest option; every row of every command table fits its options struct;
 * and the man page names every command and every option, so that --help,
 * completion (both generated from the rows) and agenthost.1 say the same. */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

#include "tap.h"

struct demo_opts {
	const char *name;
	bool force;
	struct ah_cli_int count;
	struct ah_cli_paging page;
};

static int run_demo(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	(void)c, (void)a, (void)err;
	return 0;
}

#define O struct demo_opts
static const struct ah_cli_cmd demo = {
	"demo", "[ARG]", "a command of the test", 0, 1, false, run_demo,
	{AH_OPT_STRING("name", 'n', "NAME", O, name, "a name"), AH_OPT_BOOL("force", 'f', O, force, "force"),
	 AH_OPT_INT("count", 0, "N", 1, 10, O, count, "a count, 1-10"), AH_CLI_PAGING_OPTS(O, page)},
	sizeof(O),
};

/* Parses the space-separated words of line for demo: its status, *err its error. */
static int parse(struct ah_cli *c, const char *line, struct ah_cli_args *a, ah_err *err)
{
	char *copy = ah_strdup(c->a, line), *argv[16];
	int argc = 0;
	for (char *save, *w = strtok_r(copy, " ", &save); w && argc < 16; w = strtok_r(NULL, " ", &save))
		argv[argc++] = w;
	memset(err, 0, sizeof(*err));
	return ah_cli_parse(c, &demo, argc, argv, a, err);
}

static void test_parse(struct ah_cli *c)
{
	struct ah_cli_args a;
	ah_err err;
	int rc = parse(c, "x -n bob --force --count=3 --limit 7", &a, &err);
	const struct demo_opts *o = a.opts;
	ok(rc == 0 && a.npos == 1 && !strcmp(o->name, "bob") && o->force && o->count.set && o->count.n == 3 &&
	   o->page.limit.set && o->page.limit.n == 7 && !o->page.offset.set,
	   "options fill their typed members (%s)", err.msg);
	rc = parse(c, "", &a, &err);
	o = a.opts;
	ok(rc == 0 && !o->name && !o->force && !o->count.set, "options not given stay unset");
	rc = parse(c, "--name=", &a, &err);
	o = a.opts;
	ok(rc == 0 && o->name && !*o->name, "--name= is the empty string, not unset");
	rc = parse(c, "--count 11", &a, &err);
	ok(rc == AH_CLI_EUSAGE && strstr(err.msg, "--count: expected a whole number from 1 to 10, got \"11\""),
	   "a number out of range is a usage error: %s", err.msg);
	rc = parse(c, "--count 2x", &a, &err);
	ok(rc == AH_CLI_EUSAGE && strstr(err.msg, "got \"2x\""), "a number with junk is a usage error: %s", err.msg);
	rc = parse(c, "--force=yes", &a, &err);
	ok(rc == AH_CLI_EUSAGE && strstr(err.msg, "--force takes no value"), "a flag takes no value: %s", err.msg);
	rc = parse(c, "--forse", &a, &err);
	ok(rc == AH_CLI_EUSAGE && strstr(err.msg, "unknown option --forse (did you mean --force?)"),
	   "a typo names the option meant: %s", err.msg);
	rc = parse(c, "--cou 2", &a, &err);
	ok(rc == AH_CLI_EUSAGE && strstr(err.msg, "did you mean --count?"), "a prefix names the option: %s", err.msg);
	rc = parse(c, "--zebra", &a, &err);
	ok(rc == AH_CLI_EUSAGE && strstr(err.msg, "unknown option --zebra (see agenthost demo --help)"),
	   "an option far from all says where to look: %s", err.msg);
	rc = parse(c, "-z", &a, &err);
	ok(rc == AH_CLI_EUSAGE && strstr(err.msg, "unknown option -z"), "an unknown letter: %s", err.msg);
}

static size_t kind_size(enum ah_cli_opt_kind k)
{
	return k == AH_CLI_OPT_BOOL ? sizeof(bool) : k == AH_CLI_OPT_STRING ? sizeof(const char *)
	       : k == AH_CLI_OPT_INT ? sizeof(struct ah_cli_int) : 0;
}

/* Each row's member lies inside the command's struct, and a flag, only a flag, has no value name. */
static void test_rows(const struct ah_cli_cmd *k)
{
	int bad = 0, n = 0;
	for (int i = 0; i < AH_CLI_MAX_OPTS && k->opts[i].name; i++, n++) {
		const struct ah_cli_opt *o = &k->opts[i];
		size_t size = kind_size(o->kind);
		bad += !size || o->off + size > k->opts_size || (o->kind == AH_CLI_OPT_BOOL) != !o->arg ||
		       (o->kind == AH_CLI_OPT_INT && o->lo > o->hi) || !o->help;
	}
	ok(!bad && (n == 0 || k->opts_size > 0), "the option rows of \"%s\" fit its struct", k->words);
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "r");
	static char buf[1 << 20];
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = 0;
	return buf;
}

/* s as the man page writes it: every '-' as "\-". */
static const char *roff(const char *s, char *out, size_t cap)
{
	size_t n = 0;
	for (; *s && n + 3 < cap; s++) {
		if (*s == '-')
			out[n++] = '\\';
		out[n++] = *s;
	}
	out[n] = 0;
	return out;
}

/* The man page names each command (its last word) and each of its options,
 * by its long name or, as a synopsis does, its letter in bold. */
static void test_man(const char *man, const struct ah_cli_cmd *k)
{
	char want[128], word[64], missing[512] = "";
	const char *last = strrchr(k->words, ' ');
	snprintf(word, sizeof(word), "%s", last ? last + 1 : k->words);
	if (!strstr(man, roff(word, want, sizeof(want))))
		snprintf(missing, sizeof(missing), "%s", word);
	for (int i = 0; i < AH_CLI_MAX_OPTS && k->opts[i].name; i++) {
		char opt[80], letter[16] = "";
		snprintf(opt, sizeof(opt), "--%s", k->opts[i].name);
		if (k->opts[i].shortname)
			snprintf(letter, sizeof(letter), "\\fB\\-%c\\fR", k->opts[i].shortname);
		if (!strstr(man, roff(opt, want, sizeof(want))) && !(*letter && strstr(man, letter)))
			snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), " %s", opt);
	}
	ok(!*missing, "agenthost.1 names \"%s\" and its options (missing: %s)", k->words, *missing ? missing : "none");
}

int main(void)
{
	struct ah_cli c = {.a = ah_arena_new()};
	test_parse(&c);
	const char *man = read_text(MAN_PAGE);
	ok(strlen(man) > 1000, "read %s", MAN_PAGE);
	for (int t = 0; ah_cli_tables[t]; t++)
		for (const struct ah_cli_cmd *k = ah_cli_tables[t]; k->words; k++) {
			test_rows(k);
			test_man(man, k);
		}
	ah_arena_destroy(c.a);
	return tap_done();
}
