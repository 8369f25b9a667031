/* Config file parsing, environment overrides and validation against the key
 * table; see config.h and config_keys.h. */
#include "core/config.h"
#include "core/nearest.h"
#include "core/netaddr.h"
#include "core/paths.h"
#include "core/money.h"
#include "core/plans.h"
#include "core/settings.h"
#include "core/util.h"

#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The field's C type, told by the compiler (so a row cannot lie about it). */
#define FIELD_KIND(e) \
	_Generic((e), const char *: AH_CFGF_STR, long long: AH_CFGF_LL, bool: AH_CFGF_BOOL, \
	         default: AH_CFGF_OTHER)

const ah_cfg_info ah_cfg_table[AH_CFG_COUNT] = {
#define AH_CFG_ROW(id, name, type, def, min, max, set, field, doc) \
	[AH_CFG_##id] = {name, AH_CFGT_##type, def, min, max, doc, AH_SET_##set, \
	                 offsetof(ah_settings, set.field), FIELD_KIND(((ah_settings *)0)->set.field)},
	AH_CONFIG_KEYS(AH_CFG_ROW)
#undef AH_CFG_ROW
};

const ah_settings_set_info ah_settings_sets[AH_SET_COUNT] = {
#define AH_SET_ROW(set) [AH_SET_##set] = {#set, offsetof(ah_settings, set), sizeof(((ah_settings *)0)->set)},
	AH_SET_ROW(db) AH_SET_ROW(api) AH_SET_ROW(host) AH_SET_ROW(files) AH_SET_ROW(runner)
	AH_SET_ROW(deploy) AH_SET_ROW(buckets) AH_SET_ROW(webhook) AH_SET_ROW(model)
	AH_SET_ROW(price) AH_SET_ROW(invoke) AH_SET_ROW(schedule) AH_SET_ROW(jwt) AH_SET_ROW(sandbox)
#undef AH_SET_ROW
};

struct ah_config {
	char *file[AH_CFG_COUNT];     /* the file's value (last occurrence), owned */
	const char *val[AH_CFG_COUNT]; /* environment, file or default */
	char *computed[AH_CFG_COUNT]; /* computed defaults, owned */
	long long num[AH_CFG_COUNT];
	bool set[AH_CFG_COUNT];       /* by the environment or the file */
	int line[AH_CFG_COUNT];       /* the file's line of that value, 0 if none */
	char *path;                   /* the file read, owned; NULL if none */
	ah_settings settings;         /* val and num again, by module (settings.h) */
};

int ah_cfg_find(const char *name)
{
	for (int k = 0; k < AH_CFG_COUNT; k++)
		if (strcmp(ah_cfg_table[k].name, name) == 0)
			return k;
	return -1;
}

static int unknown_key(const char *path, int lineno, const char *key, ah_err *err)
{
	const char *near = NULL;
	size_t best = 3; /* two edits at most */
	for (int k = 0; k < AH_CFG_COUNT; k++) {
		size_t d = ah_edit_distance(key, ah_cfg_table[k].name);
		if (d < best) {
			best = d;
			near = ah_cfg_table[k].name;
		}
	}
	if (near)
		return ah_err_set(err, AH_EINVALID, "%s:%d: unknown configuration key %s "
		                  "(did you mean %s?)", path, lineno, key, near);
	return ah_err_set(err, AH_EINVALID, "%s:%d: unknown configuration key %s", path, lineno, key);
}

static int parse_file(ah_config *c, FILE *f, const char *path, ah_err *err)
{
	char line[4096];
	int lineno = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		char *s = ah_trim(line);
		if (*s == '\0' || *s == '#')
			continue;
		char *eq = strchr(s, '=');
		if (!eq)
			return ah_err_set(err, AH_EINVALID, "%s:%d: expected key = value", path, lineno);
		*eq = '\0';
		int k = ah_cfg_find(ah_trim(s));
		if (k < 0)
			return unknown_key(path, lineno, ah_trim(s), err);
		/* Last occurrence wins, as in most key = value formats. */
		free(c->file[k]);
		if (!(c->file[k] = strdup(ah_trim(eq + 1))))
			return ah_err_set(err, AH_EFAIL, "out of memory");
		c->line[k] = lineno;
	}
	return 0;
}

static int parse_bool(long long *out, const char *v)
{
	static const char *const yes[] = {"true", "1", "yes", "on"};
	static const char *const no[] = {"false", "0", "no", "off", ""};
	for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++)
		if (strcmp(v, yes[i]) == 0)
			return *out = 1, 0;
	for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++)
		if (strcmp(v, no[i]) == 0)
			return *out = 0, 0;
	return -1;
}

static int parse_mode(long long *out, const char *v, long long max)
{
	char *end;
	errno = 0;
	long m = strtol(v, &end, 8);
	if (errno || end == v || *end || m < 0 || m > max)
		return -1;
	*out = m;
	return 0;
}

/* Parses v as key k's type into *num; a message naming the key and what it takes. */
static int check(int k, const char *v, const char *from, long long *num, ah_err *err)
{
	const ah_cfg_info *t = &ah_cfg_table[k];
	*num = 0;
	switch (t->type) {
	case AH_CFGT_INT:
		if (ah_parse_ll(num, v) == 0 && *num >= t->min && *num <= t->max)
			return 0;
		return ah_err_set(err, AH_EINVALID, "%s = %s%s: expected an integer in [%lld, %lld]",
		                  t->name, v, from, t->min, t->max);
	case AH_CFGT_BOOL:
		if (parse_bool(num, v) == 0)
			return 0;
		return ah_err_set(err, AH_EINVALID, "%s = %s%s: expected true or false (1/0, yes/no, "
		                  "on/off)", t->name, v, from);
	case AH_CFGT_MODE:
		if (parse_mode(num, v, t->max) == 0)
			return 0;
		return ah_err_set(err, AH_EINVALID, "%s = %s%s: expected an octal mode such as 0660",
		                  t->name, v, from);
	case AH_CFGT_PRICE:
		if (ah_price_parse(num, v) == 0)
			return 0;
		return ah_err_set(err, AH_EINVALID, "%s = %s%s: expected a decimal number of dollars "
		                  "with at most 6 decimals", t->name, v, from);
	default:
		break;
	}
	char bad[128];
	if (k == AH_CFG_STORAGE_ALLOW_HOSTS && ah_addr_list_check(v, bad, sizeof(bad)) != 0)
		return ah_err_set(err, AH_EINVALID, "%s = %s%s: \"%s\" is not an "
		                  "address[/bits][:port[-port]] entry ([v6] in brackets; no names)",
		                  t->name, v, from, bad);
	return 0;
}

/* Defaults that depend on the host or on another key. */
static const char *computed_default(ah_config *c, int k)
{
	char buf[4096] = "";
	if (k == AH_CFG_DB_HOST) {
		snprintf(buf, sizeof buf, "%s", *c->val[AH_CFG_DB_SOCKET] ? "localhost" : "127.0.0.1");
	} else if (k == AH_CFG_CRUD_WORKERS) {
		/* CRUD requests only wait on MariaDB, so a few workers per core keep
		 * the cores busy; more only add context switches and queueing. Any
		 * number covers nginx's kept connections: a worker polls all it holds
		 * (lib/api/worker.c). Measured with scripts/bench-api on 2 cores, 64
		 * connections: 3-8 workers gave 21-23k req/s with a p99 of 7.4-9.1 ms,
		 * 16 workers 16k req/s and 14-19 ms, 32 workers 15k and 27 ms. */
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		long n = ncpu > 0 ? (ncpu * 3 < 256 ? ncpu * 3 : 256) : 6;
		snprintf(buf, sizeof buf, "%ld", n < 4 ? 4 : n);
	} else if (k == AH_CFG_FILES_DIR) {
		/* Beside data_dir, not in it: nginx's workers serve these files
		 * (X-Accel-Redirect), and data_dir is the runner's alone (0700). */
		const char *d = c->val[AH_CFG_DATA_DIR];
		const char *slash = strrchr(d, '/');
		if (slash && slash > d)
			snprintf(buf, sizeof buf, "%.*s/files", (int)(slash - d), d);
		else
			snprintf(buf, sizeof buf, "%s", slash ? "/files" : "files");
	} else if (strncmp(ah_cfg_table[k].name, "price_cache_", 12) == 0) {
		/* As the provider prices them against input (Anthropic: a 5-minute
		 * cache write 1.25x, a 1-hour one 2x, a cache read 0.1x), rounded up to
		 * the micro-dollar so that a default never bills less than the
		 * provider; price_input_per_mtok comes first in the table, so its
		 * value is checked and parsed. */
		long long in = c->num[AH_CFG_PRICE_INPUT_PER_MTOK];
		long long p = k == AH_CFG_PRICE_CACHE_WRITE_PER_MTOK      ? (in * 5 + 3) / 4
		              : k == AH_CFG_PRICE_CACHE_WRITE_1H_PER_MTOK ? in * 2
		                                                          : (in + 9) / 10;
		p = p < 999999999999LL ? p : 999999999999LL; /* what a price may be */
		snprintf(buf, sizeof buf, "%lld.%06lld", p / 1000000, p % 1000000);
	} else if (strncmp(ah_cfg_table[k].name, "max_sessions_", 13) == 0) {
		/* The plan's own cap (core/plans.h) unless configured. */
		snprintf(buf, sizeof buf, "%lld", ah_plan_max_sessions(ah_cfg_table[k].name + 13));
	}
	c->computed[k] = strdup(buf);
	return c->computed[k] ? c->computed[k] : "";
}

static void env_name(char *env, size_t n, const char *key)
{
	size_t j = (size_t)snprintf(env, n, "AGENTHOST_");
	for (size_t i = 0; key[i] && j + 1 < n; i++)
		env[j++] = (char)toupper((unsigned char)key[i]);
	env[j] = '\0';
}

/* Every key's value, in table order (db_socket before db_host's default). */
static int resolve(ah_config *c, ah_err *err)
{
	for (int k = 0; k < AH_CFG_COUNT; k++) {
		char env[128], from[160] = "";
		env_name(env, sizeof env, ah_cfg_table[k].name);
		const char *v = getenv(env);
		if (v)
			snprintf(from, sizeof from, " (from %s)", env);
		else if (c->file[k]) {
			v = c->file[k];
			/* Where to fix it: the check before a start or reload names the line. */
			snprintf(from, sizeof from, " (%.120s:%d)", c->path ? c->path : "", c->line[k]);
		}
		else if (!(v = ah_cfg_table[k].def))
			v = computed_default(c, k);
		c->val[k] = v;
		c->set[k] = *from != '\0';
		if (check(k, v, from, &c->num[k], err) != 0)
			return AH_EINVALID;
	}
	return 0;
}

/* Key k's value into its settings field: str or num, as the field's type. */
static void fill(ah_settings *s, int k, const char *str, long long num)
{
	char *p = (char *)s + ah_cfg_table[k].offset;
	switch (ah_cfg_table[k].field) {
	case AH_CFGF_STR:
		memcpy(p, &str, sizeof str);
		break;
	case AH_CFGF_LL:
		memcpy(p, &num, sizeof num);
		break;
	case AH_CFGF_BOOL:
		*(bool *)p = num != 0;
		break;
	default:
		break;
	}
}

static int read_file(ah_config *c, const char *path, ah_err *err)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return ah_err_set(err, AH_ENOTFOUND, "cannot open config %s: %s", path, strerror(errno));
	if (!(c->path = strdup(path))) {
		fclose(f);
		return ah_err_set(err, AH_EFAIL, "out of memory");
	}
	int rc = parse_file(c, f, path, err);
	fclose(f);
	return rc;
}

int ah_config_load(ah_config **out, const char *path, ah_err *err)
{
	ah_config *c = calloc(1, sizeof(*c));
	if (!c)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	if (!path)
		path = getenv("AGENTHOST_CONFIG");
	/* An installed host's file, then a checkout's var/ (the working directory). */
	if (!path && access(AH_PATH_CONFIG, R_OK) == 0)
		path = AH_PATH_CONFIG;
	if (!path && access("var/agenthost.conf", R_OK) == 0)
		path = "var/agenthost.conf";
	int rc = path ? read_file(c, path, err) : 0;
	if (rc == 0)
		rc = resolve(c, err);
	if (rc != 0) {
		ah_config_free(c);
		return rc;
	}
	for (int k = 0; k < AH_CFG_COUNT; k++)
		fill(&c->settings, k, c->val[k], c->num[k]);
	*out = c;
	return 0;
}

void ah_config_free(ah_config *c)
{
	if (!c)
		return;
	for (int k = 0; k < AH_CFG_COUNT; k++) {
		free(c->file[k]);
		free(c->computed[k]);
	}
	free(c->path);
	free(c);
}

const char *ah_cfg_str(const ah_config *c, ah_cfg_key k)
{
	if (c)
		return c->val[k];
	return ah_cfg_table[k].def ? ah_cfg_table[k].def : "";
}

const char *ah_cfg_opt(const ah_config *c, ah_cfg_key k)
{
	const char *v = ah_cfg_str(c, k);
	return *v ? v : NULL;
}

long long ah_cfg_int(const ah_config *c, ah_cfg_key k)
{
	long long n = ah_cfg_table[k].min;
	ah_err err = {0};
	if (c)
		return c->num[k];
	/* No configuration: the default, or the lower bound for a computed one. */
	if (ah_cfg_table[k].def && check(k, ah_cfg_table[k].def, "", &n, &err) != 0)
		n = ah_cfg_table[k].min;
	return n;
}

bool ah_cfg_is_set(const ah_config *c, ah_cfg_key k)
{
	return c && c->set[k];
}

const char *ah_cfg_path(const ah_config *c)
{
	return c ? c->path : NULL;
}

bool ah_cfg_bool(const ah_config *c, ah_cfg_key k)
{
	return ah_cfg_int(c, k) != 0;
}

const ah_settings *ah_settings_of(const ah_config *c)
{
	/* No configuration (tools and tests): the table's defaults, once a thread. */
	static _Thread_local ah_settings defaults;
	static _Thread_local bool filled;
	if (c)
		return &c->settings;
	if (!filled) {
		for (int k = 0; k < AH_CFG_COUNT; k++)
			fill(&defaults, k, ah_cfg_str(NULL, (ah_cfg_key)k), ah_cfg_int(NULL, (ah_cfg_key)k));
		filled = true;
	}
	return &defaults;
}
