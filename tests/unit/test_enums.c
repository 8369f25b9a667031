/* Every ENUM column of schema/ against its C names table (issue 30): the
 * migrations are read in the order agenthost-admin migrate applies them (a
 * later ALTER ... MODIFY or ADD COLUMN gives a column its values), and each
 * column's values must be its table's, in order. A column the schema gains
 * without a table here fails too, so a new ENUM cannot be written by hand.
 * Usage: test_enums SOURCE_ROOT */
#include "agents.h"
#include "invocations.h"
#include "buckets/buckets.h"
#include "core/plans.h"
#include "db/enums.h"
#include "files/files.h"
#include "tap.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COLS 64
#define MAX_VALUES 32

typedef struct column {
	char name[256]; /* table.column */
	char values[MAX_VALUES][64];
	int n;
} column;

static column cols[MAX_COLS];
static int ncols;

/* The C side: a names table per column. users.plan's is the plans table's
 * names (core/plans.h), NULL here: check_column reads them from ah_plans. */
static const struct {
	const char *column;
	const char *const *names;
} TABLES[] = {
	{"users.plan", NULL},
	{"agents.source_type", ah_source_type_names},
	{"agents.status", ah_agent_status_names},
	{"deploy_jobs.state", ah_job_state_names},
	{"sessions.state", ah_session_state_names},
	{"invocations.status", ah_invocation_status_names},
	{"invocations.trigger_type", ah_trigger_type_names},
	{"buckets.provider", ah_provider_names},
	{"files.scope", ah_file_scope_names},
	{"files.status", ah_file_status_names},
	{"deploys.source_type", ah_source_type_names},
	{"webhook_deliveries.state", ah_delivery_state_names},
	{"budget_spend.scope", ah_spend_scope_names},
	{"budget_spend.period", ah_spend_period_names},
};

static column *column_named(const char *name)
{
	for (int i = 0; i < ncols; i++)
		if (strcmp(cols[i].name, name) == 0)
			return &cols[i];
	if (ncols == MAX_COLS)
		return NULL;
	snprintf(cols[ncols].name, sizeof cols[ncols].name, "%s", name);
	return &cols[ncols++];
}

/* The word that ends just before p (skipping blanks), copied into out. */
static void word_before(const char *start, const char *p, char *out, size_t cap)
{
	while (p > start && (p[-1] == ' ' || p[-1] == '\t' || p[-1] == '\n'))
		p--;
	const char *end = p;
	while (p > start && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') || (p[-1] >= '0' && p[-1] <= '9') ||
	                     (p[-1] >= 'A' && p[-1] <= 'Z')))
		p--;
	snprintf(out, cap, "%.*s", (int)(end - p), p);
}

/* The values of the ENUM( ... ) at p into c (replacing what an earlier
 * migration said). */
static void read_values(const char *p, column *c)
{
	c->n = 0;
	for (p = strchr(p, '('); p && *p && *p != ')'; p++) {
		if (*p != '\'')
			continue;
		const char *end = strchr(p + 1, '\'');
		if (!end || c->n == MAX_VALUES)
			return;
		snprintf(c->values[c->n++], sizeof c->values[0], "%.*s", (int)(end - p - 1), p + 1);
		p = end;
	}
}

/* SQL comments blanked, so an ENUM( in one is not read. */
static void strip_comments(char *s)
{
	for (char *p = strstr(s, "--"); p; p = strstr(p, "--"))
		while (*p && *p != '\n')
			*p++ = ' ';
}

static void read_migration(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	static char text[1 << 20];
	size_t n = fread(text, 1, sizeof text - 1, f);
	fclose(f);
	text[n] = 0;
	strip_comments(text);
	char table[128] = "";
	const char *p = text;
	for (;;) {
		const char *t = strstr(p, "TABLE "), *e = strstr(p, "ENUM(");
		if (!e)
			break;
		if (t && t < e) { /* CREATE TABLE x, ALTER TABLE x: the columns' table */
			t += 6;
			if (strncmp(t, "IF NOT EXISTS ", 14) == 0)
				t += 14;
			size_t len = strcspn(t, " (\n`");
			snprintf(table, sizeof table, "%.*s", (int)len, t);
			p = t + len;
			continue;
		}
		char col[128], name[256];
		word_before(text, e, col, sizeof col);
		snprintf(name, sizeof name, "%s.%s", table, col);
		column *c = column_named(name);
		if (c)
			read_values(e, c);
		p = e + 5;
	}
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The migrations (schema/, every .sql) in file-name order, as migrate applies them. */
static int read_schema(const char *root)
{
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/schema", root);
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	char *names[256];
	int n = 0;
	for (struct dirent *e; (e = readdir(d)) && n < 256;) {
		size_t len = strlen(e->d_name);
		if (len > 4 && strcmp(e->d_name + len - 4, ".sql") == 0)
			names[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof names[0], by_name);
	for (int i = 0; i < n; i++) {
		char path[8192];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		read_migration(path);
		free(names[i]);
	}
	return n;
}

/* The schema's values and the table's, in order, one line each way. */
static bool same(const column *c, const char *const *names)
{
	int i = 0;
	for (; names[i]; i++)
		if (i >= c->n || strcmp(c->values[i], names[i]) != 0)
			return false;
	return i == c->n;
}

static void check_column(const column *c)
{
	size_t n = sizeof TABLES / sizeof TABLES[0], i = 0;
	while (i < n && strcmp(TABLES[i].column, c->name) != 0)
		i++;
	if (i == n) {
		ok(0, "%s: an ENUM column with no C names table in test_enums.c", c->name);
		return;
	}
	if (!TABLES[i].names) {
		bool known = c->n == AH_PLAN_COUNT;
		for (int v = 0; known && v < c->n; v++)
			known = strcmp(c->values[v], ah_plans[v].name) == 0;
		ok(known, "%s: the schema's %d values are core/plans.h's rows, in order", c->name, c->n);
		return;
	}
	ok(same(c, TABLES[i].names), "%s: the schema's %d values are the C table's, in order", c->name, c->n);
	if (!same(c, TABLES[i].names))
		for (int v = 0; v < c->n; v++)
			printf("#   schema: %s\n", c->values[v]);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_enums SOURCE_ROOT\n");
		return 2;
	}
	ok(read_schema(argv[1]) > 0, "schema/*.sql read");
	ok(ncols == (int)(sizeof TABLES / sizeof TABLES[0]), "%d ENUM columns in the schema, %zu C tables", ncols,
	   sizeof TABLES / sizeof TABLES[0]);
	for (int i = 0; i < ncols; i++)
		check_column(&cols[i]);
	return tap_done();
}
