/* Config file parsing and environment overrides; see config.h. */
#include "core/config.h"
#include "core/log.h"
#include "core/util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct entry {
	char *key, *value;
};

struct ah_config {
	struct entry *items;
	size_t n, cap;
};

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static int add(ah_config *c, const char *k, const char *v)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 32;
		struct entry *n = realloc(c->items, cap * sizeof(*n));
		if (!n)
			return AH_EFAIL;
		c->items = n;
		c->cap = cap;
	}
	c->items[c->n].key = strdup(k);
	c->items[c->n].value = strdup(v);
	c->n++;
	return 0;
}

static int parse_file(ah_config *c, FILE *f, const char *path, ah_err *err)
{
	char line[4096];
	int lineno = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		char *s = trim(line);
		if (*s == '\0' || *s == '#')
			continue;
		char *eq = strchr(s, '=');
		if (!eq)
			return ah_err_set(err, AH_EINVALID, "%s:%d: expected key = value", path, lineno);
		*eq = '\0';
		if (add(c, trim(s), trim(eq + 1)) != 0)
			return ah_err_set(err, AH_EFAIL, "out of memory");
	}
	return 0;
}

int ah_config_load(ah_config **out, const char *path, ah_err *err)
{
	ah_config *c = calloc(1, sizeof(*c));
	if (!c)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	if (!path)
		path = getenv("AGENTHOST_CONFIG");
	if (!path && access("var/agenthost.conf", R_OK) == 0)
		path = "var/agenthost.conf";
	if (path) {
		FILE *f = fopen(path, "r");
		if (!f) {
			ah_config_free(c);
			return ah_err_set(err, AH_ENOTFOUND, "cannot open config %s", path);
		}
		int rc = parse_file(c, f, path, err);
		fclose(f);
		if (rc != 0) {
			ah_config_free(c);
			return rc;
		}
	}
	*out = c;
	return 0;
}

void ah_config_free(ah_config *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		free(c->items[i].key);
		free(c->items[i].value);
	}
	free(c->items);
	free(c);
}

const char *ah_config_get(const ah_config *c, const char *key, const char *def)
{
	char env[128] = "AGENTHOST_";
	size_t j = strlen(env);
	for (size_t i = 0; key[i] && j + 1 < sizeof(env); i++)
		env[j++] = (char)toupper((unsigned char)key[i]);
	env[j] = '\0';
	const char *v = getenv(env);
	if (v)
		return v;
	/* Last occurrence wins, as in most key = value formats. */
	for (size_t i = c ? c->n : 0; i > 0; i--)
		if (strcmp(c->items[i - 1].key, key) == 0)
			return c->items[i - 1].value;
	return def;
}

long long ah_config_int(const ah_config *c, const char *key, long long def,
                        long long min, long long max)
{
	const char *v = ah_config_get(c, key, NULL);
	long long n;
	if (!v)
		return def;
	if (ah_parse_ll(&n, v) != 0 || n < min || n > max) {
		ah_log_warn("config %s=%s is not an integer in [%lld,%lld]; using %lld",
		            key, v, min, max, def);
		return def;
	}
	return n;
}
