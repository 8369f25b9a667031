/* Typed records: see record.h. */
#include "db/record.h"
#include "core/log.h"
#include "core/util.h"

#include <string.h>

int ah_enum_find(const char *const *names, const char *s)
{
	for (int i = 0; s && names[i]; i++)
		if (strcmp(names[i], s) == 0)
			return i;
	return -1;
}

static void fill_one(char *base, const ah_col *c, const char *cell)
{
	switch (c->type) {
	case AH_COL_STR:
		*(const char **)(base + c->off) = cell;
		break;
	case AH_COL_LL: {
		long long v = c->dflt;
		if (cell && ah_parse_ll(&v, cell) != 0)
			v = c->dflt;
		*(long long *)(base + c->off) = v;
		break;
	}
	case AH_COL_BOOL:
		*(bool *)(base + c->off) = cell && strcmp(cell, "1") == 0;
		break;
	case AH_COL_ENUM: {
		int v = ah_enum_find(c->names, cell);
		if (v < 0 && cell)
			ah_log_error("column %s: unknown value '%s'", c->expr, cell);
		*(int *)(base + c->off) = v < 0 ? (int)c->dflt : v;
		break;
	}
	}
}

void ah_record_fill(void *dst, const ah_col *cols, size_t n, char *const *row)
{
	for (size_t i = 0; i < n; i++)
		fill_one(dst, &cols[i], row[i]);
}

bool ah_record_cols_match(const ah_col *cols, size_t n, const char *list)
{
	const char *p = list;
	for (size_t i = 0; i < n; i++) {
		while (*p == ' ' || (i > 0 && *p == ','))
			p++;
		size_t len = strlen(cols[i].expr);
		if (strncmp(p, cols[i].expr, len) != 0 || (p[len] != ',' && p[len] != '\0'))
			return false;
		p += len;
	}
	return *p == '\0';
}
