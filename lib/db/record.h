/* Typed records: a row of text cells parsed once into a struct by a column
 * table (SQL expression, offsetof, type), the way nginx's ngx_http_headers_in[]
 * maps header names to fields. The table is the only place that says which
 * column lands where; the SELECT list stays a string macro (prepared statements
 * are cached by their text), and ah_record_cols_match lets a unit test prove
 * the two agree.
 *
 * Cells are not copied: string fields point into the rows' arena. */
#ifndef AH_DB_RECORD_H
#define AH_DB_RECORD_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum ah_col_type {
	AH_COL_STR,   /* const char *; SQL NULL stays NULL */
	AH_COL_LL,    /* long long; NULL or not a number: dflt */
	AH_COL_BOOL,  /* bool; "1" is true, anything else (NULL too) false */
	AH_COL_ENUM,  /* int: the index of the cell in names; NULL or unknown: dflt */
} ah_col_type;

typedef struct ah_col {
	const char *expr;          /* as it appears in the SELECT list, e.g. "a.slug" */
	size_t off;                /* offsetof the field */
	ah_col_type type;
	const char *const *names;  /* AH_COL_ENUM: NULL-terminated, index = value */
	long long dflt;            /* AH_COL_LL, AH_COL_ENUM: the value of NULL */
} ah_col;

#define AH_COL_S(expr, type, f) {expr, offsetof(type, f), AH_COL_STR, NULL, 0}
#define AH_COL_I(expr, type, f, d) {expr, offsetof(type, f), AH_COL_LL, NULL, d}
#define AH_COL_B(expr, type, f) {expr, offsetof(type, f), AH_COL_BOOL, NULL, 0}
#define AH_COL_E(expr, type, f, names, d) {expr, offsetof(type, f), AH_COL_ENUM, names, d}

/* Fills dst from the first n cells of row, one per column of cols. An enum
 * cell that names no value is a schema the code does not know: logged, and
 * the column's dflt (chosen to be the safe value) is used. */
void ah_record_fill(void *dst, const ah_col *cols, size_t n, char *const *row);

/* The index of s in the NULL-terminated names, or -1. */
int ah_enum_find(const char *const *names, const char *s);

/* True when list (a SELECT list: expressions separated by commas and spaces)
 * names exactly the expressions of cols, in order. For unit tests. */
bool ah_record_cols_match(const ah_col *cols, size_t n, const char *list);

/* For a table private to one file: asserts once per process, at first use,
 * that it and its SELECT list agree (a branch per call after that). */
#define AH_RECORD_CHECK(done, cols, n, list)                                           \
	do {                                                                              \
		if (!(done)) {                                                                \
			assert(ah_record_cols_match(cols, n, list));                              \
			(done) = true;                                                            \
		}                                                                             \
	} while (0)

#endif
