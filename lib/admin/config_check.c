/* agenthost-admin config check [FILE] [--example FILE]: what every program would make of the
 * configuration, without starting anything or opening the database. The
 * units run it before a start (ExecStartPre), so that a broken file stops
 * the start with the key and its line, and the processes already running go
 * on serving. An unknown key is refused with its line and the nearest key
 * (config.c); a value of the wrong type with its line.
 *
 * It also says which keys the installed example configuration mentions but
 * the file does not, not even in a comment: keys added since the file was
 * written (an upgrade keeps the operator's file). They take their defaults,
 * which it prints. */
#include "admin/admin.h"
#include "core/paths.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* Marks in seen[] the keys a `key = value` or `# key = value` line names. */
static void mentioned(FILE *f, bool seen[AH_CFG_COUNT])
{
	char line[4096], name[128];
	while (fgets(line, sizeof line, f)) {
		const char *p = line;
		while (*p == '#' || isspace((unsigned char)*p))
			p++;
		size_t n = 0;
		while (n + 1 < sizeof name && (islower((unsigned char)p[n]) || isdigit((unsigned char)p[n]) ||
		                               p[n] == '_'))
			name[n] = p[n], n++;
		name[n] = '\0';
		const char *q = p + n;
		while (*q == ' ' || *q == '\t')
			q++;
		int k = n && *q == '=' ? ah_cfg_find(name) : -1;
		if (k >= 0)
			seen[k] = true;
	}
}

static bool read_mentions(const char *path, bool seen[AH_CFG_COUNT])
{
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	mentioned(f, seen);
	fclose(f);
	return true;
}

/* The keys new to the file: in the example, not in the file, not set by
 * the environment either. */
static int new_keys(const ah_config *cfg, const char *file, const char *example)
{
	bool in_example[AH_CFG_COUNT] = {0}, in_file[AH_CFG_COUNT] = {0};
	if (!read_mentions(example, in_example) || !read_mentions(file, in_file))
		return 0;
	int n = 0;
	for (int k = 0; k < AH_CFG_COUNT; k++) {
		if (!in_example[k] || in_file[k] || ah_cfg_is_set(cfg, (ah_cfg_key)k))
			continue;
		const char *v = ah_cfg_str(cfg, (ah_cfg_key)k);
		printf("%s: %s is not in this file (new since it was written?): it takes its default, %s\n",
		       file, ah_cfg_table[k].name, *v ? v : "(empty)");
		n++;
	}
	return n;
}

int ah_admin_config_check(const char *path, const char *example)
{
	ah_config *cfg = NULL;
	ah_err err = {0};
	if (ah_config_load(&cfg, path, &err) != 0) {
		fprintf(stderr, "agenthost-admin: configuration refused: %s\n", err.msg);
		return 1;
	}
	const char *file = ah_cfg_path(cfg);
	if (!example)
		example = AH_PATH_DATA "/agenthost.conf.example";
	int n = file ? new_keys(cfg, file, example) : 0;
	printf("%s: configuration OK%s\n", file ? file : "(no file: defaults and environment)",
	       n ? " (the keys above take their defaults)" : "");
	ah_config_free(cfg);
	return 0;
}
