/* Unit test of the command-line client's pure parts (lib/cli), printed as TAP:
 * the slug the API would derive from a name, which files `deploy` packs (the
 * .gitignore/.agenthostignore forms, node_modules and .git left out), and the
 * command tables (unique words, no option that shadows a global one, short
 * letters unique per command, argument counts that make sense). */
#include "cli/cli.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/project.h"
#include "tap.h"

static const struct { const char *name, *slug; } slugs[] = {
	{"Hello agent", "hello-agent"}, {"  My  Agent!! v2 ", "my-agent-v2"}, {"ÄÖÜ x", "x"},
	{"a--b__c", "a-b-c"}, {"!!!", ""}, {"UPPER", "upper"},
};

/* Files made in the project, the ignore files' text, and what must be packed
 * (paths, directories with a trailing '/'), as one space-separated list. */
static const struct { const char *gitignore, *agentignore, *files, *want; } packs[] = {
	{"", "", "agent.json index.js", "agent.json index.js"},
	{"", "", "a.js node_modules/x/i.js .git/HEAD sub/node_modules/y.js sub/a.js", "a.js sub/ sub/a.js"},
	{"*.log\n", "", "a.js b.log sub/c.log", "a.js sub/"},
	{"build/\n", "", "a.js build/o.js sub/build/p.js build.txt", "a.js build.txt sub/"},
	{"/top.txt\n", "", "top.txt sub/top.txt", "sub/ sub/top.txt"},
	{"", "sub/deep/*.tmp\n", "sub/deep/a.tmp sub/deep/b.js other/deep/a.tmp",
	 "other/ other/deep/ other/deep/a.tmp sub/ sub/deep/ sub/deep/b.js"},
	{"*.env\n!keep.env\n", "", "a.env keep.env", "keep.env"},
	{"# comment\n\n", "**/*.map\n", "x.map a/b/y.map a/b/z.js", "a/ a/b/ a/b/z.js"},
};

static void make_file(const char *root, const char *rel)
{
	char path[4096], *slash;
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (slash = strchr(path + strlen(root) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = 0;
		mkdir(path, 0755);
		*slash = '/';
	}
	FILE *f = fopen(path, "w");
	if (f) {
		fputs("x", f);
		fclose(f);
	}
}

/* The packed names, sorted, space-separated ("sub/a.js" written as listed). */
static char *packed_names(FILE *tar)
{
	static char out[4096];
	struct archive *ar = archive_read_new();
	struct archive_entry *e;
	out[0] = 0;
	archive_read_support_filter_gzip(ar);
	archive_read_support_format_tar(ar);
	rewind(tar);
	if (archive_read_open_FILE(ar, tar) != ARCHIVE_OK)
		return out;
	while (archive_read_next_header(ar, &e) == ARCHIVE_OK) {
		const char *n = archive_entry_pathname(e);
		/* libarchive names directories with their '/' already; say it either way. */
		bool dir = archive_entry_filetype(e) == AE_IFDIR && n[strlen(n) - 1] != '/';
		if (strcmp(n, ".gitignore") && strcmp(n, ".agenthostignore"))
			snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s%s", *out ? " " : "", n, dir ? "/" : "");
	}
	archive_read_free(ar);
	return out;
}

static void write_text(const char *root, const char *name, const char *text)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", root, name);
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void test_pack(struct ah_cli *c, size_t i)
{
	char root[] = "/tmp/ah-cli-pack-XXXXXX", files[1024], cmd[128];
	if (!mkdtemp(root))
		return ok(0, "mkdtemp");
	write_text(root, ".gitignore", packs[i].gitignore);
	write_text(root, ".agenthostignore", packs[i].agentignore);
	snprintf(files, sizeof(files), "%s", packs[i].files);
	for (char *save, *f = strtok_r(files, " ", &save); f; f = strtok_r(NULL, " ", &save))
		make_file(root, f);
	FILE *tar;
	long long size;
	int n;
	ah_err err = {0};
	int rc = ah_cli_pack(c, root, &tar, &size, &n, &err);
	const char *got = rc ? err.msg : packed_names(tar);
	ok(rc == 0 && !strcmp(got, packs[i].want), "pack row %zu: want \"%s\", got \"%s\"", i, packs[i].want, got);
	if (!rc)
		fclose(tar);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	if (system(cmd) != 0)
		ok(0, "cleanup %s", root);
}

static bool reserved(const char *name)
{
	return !strcmp(name, "json") || !strcmp(name, "url") || !strcmp(name, "help");
}

static void test_table_row(const struct ah_cli_cmd *k)
{
	int seen = 0, dup = 0;
	for (int t = 0; ah_cli_tables[t]; t++)
		for (const struct ah_cli_cmd *o = ah_cli_tables[t]; o->words; o++)
			seen += !strcmp(o->words, k->words);
	for (int i = 0; i < AH_CLI_MAX_OPTS && k->opts[i].name; i++)
		for (int j = i + 1; j < AH_CLI_MAX_OPTS && k->opts[j].name; j++)
			dup += !strcmp(k->opts[i].name, k->opts[j].name) ||
			       (k->opts[i].shortname && k->opts[i].shortname == k->opts[j].shortname);
	bool shadow = false;
	for (int i = 0; i < AH_CLI_MAX_OPTS && k->opts[i].name; i++)
		shadow |= reserved(k->opts[i].name) || k->opts[i].shortname == 'h';
	ok(seen == 1 && !dup && !shadow && k->run && k->summary &&
	   (k->max_pos < 0 || k->min_pos <= k->max_pos), "command \"%s\" is well-formed", k->words);
}

int main(void)
{
	struct ah_cli c = {.a = ah_arena_new()};
	for (size_t i = 0; i < sizeof(slugs) / sizeof(slugs[0]); i++) {
		const char *s = ah_slug_from_name(c.a, slugs[i].name, AH_SLUG_MAX);
		ok(!strcmp(s, slugs[i].slug), "slug of \"%s\" is \"%s\" (got \"%s\")", slugs[i].name, slugs[i].slug, s);
	}
	for (size_t i = 0; i < sizeof(packs) / sizeof(packs[0]); i++)
		test_pack(&c, i);
	for (int t = 0; ah_cli_tables[t]; t++)
		for (const struct ah_cli_cmd *k = ah_cli_tables[t]; k->words; k++)
			test_table_row(k);
	ah_arena_destroy(c.a);
	return tap_done();
}
