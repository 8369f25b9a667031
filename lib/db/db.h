/* MariaDB access: one connection per process, prepared statements only (cached
 * per connection), every cell returned as text in the caller's arena, and a
 * transparent reconnect-and-retry when the server went away outside a transaction.
 * With db_hosts, a list of cluster nodes to fail over between (db.c says what
 * is retried where).
 *
 * Parameters are described by a format string, one letter per `?`:
 *   s  const char *      (NULL binds SQL NULL)
 *   b  const void *, size_t   (bytes; NULL binds SQL NULL)
 *   i  long long
 */
#ifndef AH_DB_DB_H
#define AH_DB_DB_H

#include <stdbool.h>
#include <stddef.h>

#include "core/arena.h"
#include "core/config.h"
#include "core/err.h"
#include "core/util.h"

typedef struct ah_db ah_db;

typedef struct ah_rows {
	size_t n, ncols;
	char ***v;            /* v[row][col]: NUL-terminated, NULL for SQL NULL */
	unsigned long **len;  /* byte length of each cell */
} ah_rows;

int ah_db_open(ah_db **out, const ah_config *cfg, ah_err *err);
void ah_db_close(ah_db *db);

/* SELECT: rows copied into arena a. Returns 0 or AH_EFAIL (message: ah_db_error). */
int ah_db_query(ah_db *db, ah_arena *a, ah_rows *out, const char *sql, const char *fmt, ...);
/* Everything else. *affected may be NULL. A duplicate key is AH_ECONFLICT. */
int ah_db_exec(ah_db *db, unsigned long long *affected, const char *sql, const char *fmt, ...);
/* The insert id (or LAST_INSERT_ID(expr) value) of the last ah_db_exec. */
unsigned long long ah_db_insert_id(const ah_db *db);

/* The last statement failed on a deadlock or a lock wait timeout: the server
 * rolled its transaction back, and running the transaction again is the cure. */
bool ah_db_deadlocked(const ah_db *db);
/* The last statement failed because the server could not be reached (and a
 * reconnect failed too): a 503 to retry, not a 500. */
bool ah_db_unavailable(const ah_db *db);

int ah_db_begin(ah_db *db);
int ah_db_commit(ah_db *db);
void ah_db_rollback(ah_db *db);

const char *ah_db_error(const ah_db *db);
/* Runs a script of several statements (migrations only: never with input). */
int ah_db_exec_script(ah_db *db, const char *sql, ah_err *err);
/* Checks the connection (reconnecting if needed); 0 when the server answers. */
int ah_db_ping(ah_db *db);

/* Convenience for a single cell: row r, column c, or NULL. */
static inline const char *ah_cell(const ah_rows *rows, size_t r, size_t c)
{
	return (r < rows->n && c < rows->ncols) ? rows->v[r][c] : NULL;
}

/* A cell's integer value; 0 for NULL or anything that is not a whole number. */
static inline long long ah_cell_ll(const char *cell)
{
	long long v = 0;
	return (cell && ah_parse_ll(&v, cell) == 0) ? v : 0;
}

#endif
