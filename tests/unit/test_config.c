/* The configuration table: values checked at load (a typo'd key or a bad
 * number is an error naming it), and the documentation kept in step with the
 * table: README.md's configuration table and lib/sandbox/sandbox.h's key list
 * name exactly the table's keys. Usage: test_config SOURCE_ROOT */
#include "core/config.h"
#include "tap.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Loads a config file holding text; the error message in msg. */
static int load_text(const char *text, char *msg, size_t n)
{
	char path[] = "/tmp/ah-test-config-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	fputs(text, f);
	fclose(f);
	ah_config *c = NULL;
	ah_err err = {0};
	int rc = ah_config_load(&c, path, &err);
	snprintf(msg, n, "%s", err.msg);
	ah_config_free(c);
	unlink(path);
	return rc;
}

static void test_errors(void)
{
	char msg[512];
	ok(load_text("rate_limt_crud = 5\n", msg, sizeof msg) == AH_EINVALID &&
	   strstr(msg, "rate_limt_crud") && strstr(msg, "did you mean rate_limit_crud"),
	   "a typo'd key is an error naming it and the key meant (%s)", msg);
	ok(load_text("no_such_thing = 5\n", msg, sizeof msg) == AH_EINVALID &&
	   strstr(msg, "unknown configuration key no_such_thing") && !strstr(msg, "did you mean"),
	   "an unknown key far from any is an error without a guess (%s)", msg);
	ok(load_text("db_port = 33o6\n", msg, sizeof msg) == AH_EINVALID && strstr(msg, "db_port") &&
	   strstr(msg, "[1, 65535]"), "a number that is not one is an error naming key and range (%s)", msg);
	ok(load_text("sandbox_cpus = 0\n", msg, sizeof msg) == AH_EINVALID &&
	   strstr(msg, "sandbox_cpus"), "a number out of bounds is an error (%s)", msg);
	ok(load_text("model_gateway = maybe\n", msg, sizeof msg) == AH_EINVALID &&
	   strstr(msg, "model_gateway"), "a bool that is neither is an error (%s)", msg);
	ok(load_text("socket_mode = 0999\n", msg, sizeof msg) == AH_EINVALID &&
	   strstr(msg, "socket_mode"), "a mode that is not octal is an error (%s)", msg);
	ok(load_text("price_input_per_mtok = 3.1234567\n", msg, sizeof msg) == AH_EINVALID &&
	   strstr(msg, "price_input_per_mtok"), "a price with 7 decimals is an error (%s)", msg);
	setenv("AGENTHOST_RATE_LIMIT_INVOKE", "ten", 1);
	ok(load_text("", msg, sizeof msg) == AH_EINVALID && strstr(msg, "rate_limit_invoke") &&
	   strstr(msg, "AGENTHOST_RATE_LIMIT_INVOKE"), "a bad environment value names its variable (%s)", msg);
	unsetenv("AGENTHOST_RATE_LIMIT_INVOKE");
	setenv("AGENTHOST_NOT_A_KEY", "x", 1);
	ok(load_text("", msg, sizeof msg) == 0, "AGENTHOST_ variables that are no key are ignored");
	unsetenv("AGENTHOST_NOT_A_KEY");
}

static void test_values(void)
{
	char path[] = "/tmp/ah-test-config-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	fputs("socket_mode = 0640\nmodel_gateway = on\ndb_socket = /run/x.sock\n"
	      "price_output_per_mtok = 0.5\ngit_allow_private = no\n", f);
	fclose(f);
	ah_config *c = NULL;
	ah_err err = {0};
	ok(ah_config_load(&c, path, &err) == 0, "the defaults and these values load (%s)", err.msg);
	unlink(path);
	if (!c)
		return;
	ok(ah_cfg_int(c, AH_CFG_SOCKET_MODE) == 0640, "a mode is read as octal");
	ok(ah_cfg_bool(c, AH_CFG_MODEL_GATEWAY) && !ah_cfg_bool(c, AH_CFG_GIT_ALLOW_PRIVATE),
	   "bools read on and no");
	ok(ah_cfg_int(c, AH_CFG_PRICE_OUTPUT_PER_MTOK) == 500000, "a price is read in micro-dollars");
	ok(strcmp(ah_cfg_str(c, AH_CFG_DB_HOST), "localhost") == 0,
	   "db_host defaults to localhost with a socket");
	ok(ah_cfg_int(c, AH_CFG_MAX_SESSIONS_FREE) == 3 && ah_cfg_int(c, AH_CFG_MAX_SESSIONS_PRO) == 20 &&
	   ah_cfg_int(c, AH_CFG_MAX_SESSIONS_ENTERPRISE) == 100, "session caps default to the plans'");
	ok(ah_cfg_int(c, AH_CFG_CRUD_WORKERS) >= 4, "crud_workers' computed default is at least 4");
	ok(ah_cfg_is_set(c, AH_CFG_SOCKET_MODE) && !ah_cfg_is_set(c, AH_CFG_DB_PORT),
	   "is_set tells a configured key from a default");
	ah_config_free(c);
	ok(strcmp(ah_cfg_str(NULL, AH_CFG_RUNNER_SOCKET), AH_PATH_RUNNER_RUN "/runner.sock") == 0 &&
	   ah_cfg_int(NULL, AH_CFG_RATE_LIMIT_CRUD) == 100, "no config reads the table's defaults");
	ok(ah_cfg_find("max_sessions_pro") == AH_CFG_MAX_SESSIONS_PRO && ah_cfg_find("nope") < 0,
	   "keys are found by name");
}

/* Cache prices default to the provider's multiples of the input price,
 * rounded up to the micro-dollar; set, they are what is set. */
static void test_cache_prices(void)
{
	static const struct {
		const char *text;
		long long write, write_1h, read; /* micro-dollars */
	} rows[] = {
		{"", 3750000, 6000000, 300000},
		{"price_input_per_mtok = 0.000001\n", 2, 2, 1},
		{"price_input_per_mtok = 1.000003\n", 1250004, 2000006, 100001},
		{"price_input_per_mtok = 999999.999999\n", 999999999999LL, 999999999999LL, 100000000000LL},
		{"price_cache_write_per_mtok = 1\nprice_cache_write_1h_per_mtok = 0\n"
		 "price_cache_read_per_mtok = 0.5\n", 1000000, 0, 500000},
	};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		char path[] = "/tmp/ah-test-config-XXXXXX";
		int fd = mkstemp(path);
		FILE *f = fdopen(fd, "w");
		fputs(rows[i].text, f);
		fclose(f);
		ah_config *c = NULL;
		ah_err err = {0};
		int rc = ah_config_load(&c, path, &err);
		unlink(path);
		ok(rc == 0 && ah_cfg_int(c, AH_CFG_PRICE_CACHE_WRITE_PER_MTOK) == rows[i].write &&
		   ah_cfg_int(c, AH_CFG_PRICE_CACHE_WRITE_1H_PER_MTOK) == rows[i].write_1h &&
		   ah_cfg_int(c, AH_CFG_PRICE_CACHE_READ_PER_MTOK) == rows[i].read,
		   "cache prices, row %zu: %s, %s, %s", i,
		   c ? ah_cfg_str(c, AH_CFG_PRICE_CACHE_WRITE_PER_MTOK) : err.msg,
		   c ? ah_cfg_str(c, AH_CFG_PRICE_CACHE_WRITE_1H_PER_MTOK) : "",
		   c ? ah_cfg_str(c, AH_CFG_PRICE_CACHE_READ_PER_MTOK) : "");
		ah_config_free(c);
	}
}

static char *slurp(const char *root, const char *rel)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", root, rel);
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	static char buf[1 << 20];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strdup(buf);
}

/* Marks in seen[] the keys named as `key` in text[from, to), and reports a
 * backticked lower_case word that is no key (a key documented but not read). */
static bool scan_ticks(const char *from, const char *to, bool *seen, const char *where)
{
	bool all_known = true;
	for (const char *p = strchr(from, '`'); p && p < to; p = strchr(p + 1, '`')) {
		const char *e = strchr(p + 1, '`');
		char word[128];
		if (!e || e > to || (size_t)(e - p - 1) >= sizeof word)
			break;
		snprintf(word, sizeof word, "%.*s", (int)(e - p - 1), p + 1);
		p = e;
		int k = ah_cfg_find(word);
		if (k >= 0)
			seen[k] = true;
		else if (strchr(word, '_') && strspn(word, "abcdefghijklmnopqrstuvwxyz0123456789_") == strlen(word)) {
			printf("# %s names `%s`, which is no configuration key\n", where, word);
			all_known = false;
		}
	}
	return all_known;
}

/* The first column of each row of README's table under "## Configuration". */
static void test_readme(const char *root)
{
	char *text = slurp(root, "README.md");
	const char *sec = text ? strstr(text, "\n## Configuration\n") : NULL;
	ok(sec != NULL, "README.md has a Configuration section");
	if (!sec)
		return free(text);
	const char *end = strstr(sec + 1, "\n#");
	bool seen[AH_CFG_COUNT] = {false}, known = true;
	for (const char *l = strstr(sec, "\n| `"); l && (!end || l < end); l = strstr(l + 1, "\n| `")) {
		const char *cell_end = strstr(l + 3, " |");
		known &= scan_ticks(l, cell_end ? cell_end : l + 3, seen, "README.md");
	}
	bool all = true;
	for (int k = 0; k < AH_CFG_COUNT; k++)
		if (!seen[k]) {
			printf("# README.md's configuration table lacks `%s`\n", ah_cfg_table[k].name);
			all = false;
		}
	ok(all, "README.md's configuration table names every key of the table");
	ok(known, "README.md's configuration table names no key the table lacks");
	free(text);
}

/* The "Config keys" comment of sandbox.h: one " *   sandbox_x" line per key. */
static void test_sandbox_h(const char *root)
{
	char *text = slurp(root, "lib/sandbox/sandbox.h");
	bool seen[AH_CFG_COUNT] = {false}, known = true, all = true;
	for (const char *l = text ? strstr(text, "\n *   sandbox_") : NULL; l; l = strstr(l + 1, "\n *   sandbox_")) {
		char word[128];
		size_t n = strspn(l + 6, "abcdefghijklmnopqrstuvwxyz0123456789_");
		snprintf(word, sizeof word, "%.*s", (int)(n < sizeof word ? n : sizeof word - 1), l + 6);
		int k = ah_cfg_find(word);
		if (k >= 0)
			seen[k] = true;
		else
			printf("# sandbox.h lists %s, which is no configuration key\n", word), known = false;
	}
	for (int k = 0; k < AH_CFG_COUNT; k++)
		if (!seen[k] && strncmp(ah_cfg_table[k].name, "sandbox_", 8) == 0) {
			printf("# sandbox.h's key list lacks %s\n", ah_cfg_table[k].name);
			all = false;
		}
	ok(text && all && known, "sandbox.h lists exactly the table's sandbox_* keys");
	free(text);
}

int main(int argc, char **argv)
{
	unsetenv("AGENTHOST_CONFIG");
	test_errors();
	test_values();
	test_cache_prices();
	for (int k = 0; k < AH_CFG_COUNT; k++)
		ok(ah_cfg_table[k].name && ah_cfg_table[k].doc && *ah_cfg_table[k].doc,
		   "%s has a name and a doc line", ah_cfg_table[k].name);
	if (argc > 1) {
		test_readme(argv[1]);
		test_sandbox_h(argv[1]);
	}
	return tap_done();
}
