/* See db.h. Prepared statements are cached per connection keyed by the SQL text's
 * address (callers pass string literals), with a string compare to be safe.
 *
 * With db_hosts (a Galera cluster's nodes) a connection is to one node at a
 * time: the one that answered last, else the next in the list. What is retried
 * on another connection is only what cannot have taken effect: a statement
 * that was never sent (prepare failed, the server had gone away before it), one
 * a node refused because it is not part of the primary component (1047), and
 * an autocommit statement rolled back as a deadlock or certification conflict
 * (1213). A statement whose connection broke while it ran may have committed,
 * so it is retried only if it reads. Nothing is retried inside a transaction:
 * its owner runs the whole transaction again (ah_db_deadlocked). */
#include "db/internal.h"
#include "core/log.h"
#include "core/metrics.h"

#include <errmsg.h>
#include <mysqld_error.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void ah_db_set_error(ah_db *db, const char *what, const char *msg)
{
	snprintf(db->error, sizeof(db->error), "%s: %s", what, msg);
}

static void drop_cache(ah_db *db)
{
	for (size_t i = 0; i < CACHE_SIZE; i++) {
		if (db->cache[i].stmt)
			mysql_stmt_close(db->cache[i].stmt);
		db->cache[i].stmt = NULL;
		db->cache[i].sql = NULL;
	}
}

int ah_db_open(ah_db **out, const ah_config *cfg, ah_err *err)
{
	ah_db *db = calloc(1, sizeof(*db));
	if (!db)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	db->cfg = cfg;
	if (ah_db_parse_nodes(db, err) != 0) {
		free(db);
		return AH_EINVALID;
	}
	if (ah_db_connect(db) != 0) {
		ah_err_set(err, AH_EFAIL, "%s", db->error);
		free(db);
		return AH_EFAIL;
	}
	*out = db;
	return 0;
}

void ah_db_close(ah_db *db)
{
	if (!db)
		return;
	drop_cache(db);
	if (db->conn)
		mysql_close(db->conn);
	free(db);
}

static bool is_lost(unsigned err)
{
	return err == CR_SERVER_GONE_ERROR || err == CR_SERVER_LOST ||
	       err == ER_CONNECTION_KILLED || err == CR_CONNECTION_ERROR || err == ER_WSREP_NOT_READY;
}

/* The statement cannot have taken effect, whatever it was. */
static bool never_ran(unsigned err, bool sent)
{
	return !sent || err == CR_SERVER_GONE_ERROR || err == CR_CONNECTION_ERROR ||
	       err == ER_WSREP_NOT_READY;
}

static bool is_read(const char *sql)
{
	return strncmp(sql, "SELECT", 6) == 0 && !strstr(sql, "FOR UPDATE");
}

/* Whether a failed statement outside a transaction is run again, and how:
 * 1 on a new connection, 2 on this one (after a pause), 0 not at all. */
static int retry_kind(ah_db *db, const char *sql, unsigned err, bool sent)
{
	if (db->in_tx)
		return 0;
	if (err == ER_LOCK_DEADLOCK)
		return 2;
	if (is_lost(err) && (never_ran(err, sent) || is_read(sql)))
		return 1;
	return 0;
}

static void drop_conn(ah_db *db)
{
	drop_cache(db);
	if (db->conn)
		mysql_close(db->conn);
	db->conn = NULL;
}

static int reconnect(ah_db *db)
{
	drop_conn(db);
	db->in_tx = false;
	return ah_db_connect(db);
}

static MYSQL_STMT *prepare(ah_db *db, const char *sql, unsigned *errnum)
{
	size_t h = ((uintptr_t)sql >> 4) % CACHE_SIZE;
	for (size_t k = 0; k < CACHE_SIZE; k++) {
		struct cached *c = &db->cache[(h + k) % CACHE_SIZE];
		if (c->sql == sql || (c->sql && strcmp(c->sql, sql) == 0))
			return c->stmt;
		if (!c->sql) {
			MYSQL_STMT *st = mysql_stmt_init(db->conn);
			if (!st || mysql_stmt_prepare(st, sql, strlen(sql)) != 0) {
				*errnum = db->last_errno = st ? mysql_stmt_errno(st) : CR_OUT_OF_MEMORY;
				ah_db_set_error(db, "prepare", st ? mysql_stmt_error(st) : "out of memory");
				if (st)
					mysql_stmt_close(st);
				return NULL;
			}
			c->sql = sql;
			c->stmt = st;
			return st;
		}
	}
	/* Cache full: cannot happen with a fixed set of statements. */
	*errnum = 0;
	ah_db_set_error(db, "prepare", "statement cache full");
	return NULL;
}

static int bind_params(MYSQL_BIND *b, long long *ints, const char *fmt, va_list ap)
{
	size_t n = fmt ? strlen(fmt) : 0;
	if (n > MAX_PARAMS)
		return AH_EFAIL;
	for (size_t i = 0; i < n; i++) {
		memset(&b[i], 0, sizeof(b[i]));
		switch (fmt[i]) {
		case 's': {
			const char *s = va_arg(ap, const char *);
			b[i].buffer_type = s ? MYSQL_TYPE_STRING : MYSQL_TYPE_NULL;
			b[i].buffer = (void *)s;
			b[i].buffer_length = s ? strlen(s) : 0;
			break;
		}
		case 'b': {
			const void *p = va_arg(ap, const void *);
			size_t len = va_arg(ap, size_t);
			b[i].buffer_type = p ? MYSQL_TYPE_BLOB : MYSQL_TYPE_NULL;
			b[i].buffer = (void *)p;
			b[i].buffer_length = len;
			break;
		}
		case 'i': {
			ints[i] = va_arg(ap, long long);
			b[i].buffer_type = MYSQL_TYPE_LONGLONG;
			b[i].buffer = &ints[i];
			break;
		}
		default:
			return AH_EFAIL;
		}
	}
	return 0;
}

/* Binds and executes; retries what retry_kind allows: a lost connection on
 * every node of a cluster once, a deadlock victim up to DEADLOCK_TRIES times
 * with a growing, jittered pause (writers that met on one row, such as a
 * user's counters, would otherwise meet again). */
#define DEADLOCK_TRIES 8
static MYSQL_STMT *run(ah_db *db, const char *sql, const char *fmt, va_list ap)
{
	MYSQL_BIND binds[MAX_PARAMS];
	long long ints[MAX_PARAMS];
	int tries = (db->nnodes > 2 ? db->nnodes : 2) + DEADLOCK_TRIES;
	int lost = 0, deadlocks = 0;
	for (int attempt = 0; attempt < tries; attempt++) {
		unsigned errnum = 0;
		bool sent = false;
		/* A transaction's connection that broke is not replaced mid-way: the
		 * rest of the transaction would run outside it. */
		if (!db->conn && (db->in_tx || reconnect(db) != 0))
			return NULL;
		MYSQL_STMT *st = prepare(db, sql, &errnum);
		if (st) {
			va_list cp;
			va_copy(cp, ap);
			int rc = bind_params(binds, ints, fmt, cp);
			va_end(cp);
			if (rc != 0 || mysql_stmt_param_count(st) != (fmt ? strlen(fmt) : 0)) {
				ah_db_set_error(db, "bind", "parameter count mismatch");
				return NULL;
			}
			db->last_errno = 0;
			if (mysql_stmt_bind_param(st, binds) == 0 && mysql_stmt_execute(st) == 0)
				return st;
			sent = true;
			errnum = db->last_errno = mysql_stmt_errno(st);
			ah_db_set_error(db, "execute", mysql_stmt_error(st));
		}
		int kind = retry_kind(db, sql, errnum, sent);
		if ((kind == 1 && ++lost > (db->nnodes > 2 ? db->nnodes : 2)) ||
		    (kind == 2 && ++deadlocks >= DEADLOCK_TRIES))
			kind = 0;
		if (kind == 0) {
			if (errnum == ER_WSREP_NOT_READY)
				drop_conn(db); /* the next statement looks for a node that works */
			return NULL;
		}
		ah_mx_db_retry(kind == 2 ? AH_MX_RETRY_DEADLOCK : AH_MX_RETRY_LOST);
		if (kind == 2) {
			ah_sleep_jittered(5000u * (unsigned)deadlocks, 10000);
			continue;
		}
		ah_log_warn("database connection lost (%s); reconnecting", db->error);
		if (errnum == ER_WSREP_NOT_READY && db->nnodes > 0)
			db->cur = (db->cur + 1) % db->nnodes;
		if (reconnect(db) != 0)
			return NULL;
	}
	return NULL;
}

/* A result can fail while it is read, not only when it is run: on a cluster a
 * transaction aborted by another node's write set reports its deadlock (1213)
 * at the next fetch. Its number is kept, so that the owner of the transaction
 * sees ah_db_deadlocked() and runs it again. */
static int fetch_failed(ah_db *db, MYSQL_STMT *st)
{
	db->last_errno = mysql_stmt_errno(st);
	ah_db_set_error(db, "fetch", mysql_stmt_error(st));
	mysql_stmt_free_result(st);
	return AH_EFAIL;
}

static int fetch_rows(ah_db *db, MYSQL_STMT *st, ah_arena *a, ah_rows *out)
{
	size_t ncols = mysql_stmt_field_count(st);
	MYSQL_BIND *b = ah_alloc(a, sizeof(*b) * (ncols ? ncols : 1));
	unsigned long *lens = ah_alloc(a, sizeof(*lens) * (ncols ? ncols : 1));
	my_bool *nulls = ah_alloc(a, sizeof(*nulls) * (ncols ? ncols : 1));
	char *bufs = ah_alloc(a, CELL_BUF * (ncols ? ncols : 1));
	for (size_t c = 0; c < ncols; c++) {
		b[c].buffer_type = MYSQL_TYPE_STRING;
		b[c].buffer = bufs + c * CELL_BUF;
		b[c].buffer_length = CELL_BUF;
		b[c].length = &lens[c];
		b[c].is_null = &nulls[c];
	}
	if (mysql_stmt_bind_result(st, b) != 0 || mysql_stmt_store_result(st) != 0)
		return fetch_failed(db, st);
	size_t n = (size_t)mysql_stmt_num_rows(st);
	out->n = n;
	out->ncols = ncols;
	out->v = ah_alloc(a, sizeof(char **) * (n ? n : 1));
	out->len = ah_alloc(a, sizeof(unsigned long *) * (n ? n : 1));
	for (size_t r = 0; r < n; r++) {
		int rc = mysql_stmt_fetch(st);
		if (rc == 1 || rc == MYSQL_NO_DATA)
			return fetch_failed(db, st);
		out->v[r] = ah_alloc(a, sizeof(char *) * (ncols ? ncols : 1));
		out->len[r] = ah_alloc(a, sizeof(unsigned long) * (ncols ? ncols : 1));
		for (size_t c = 0; c < ncols; c++) {
			out->len[r][c] = nulls[c] ? 0 : lens[c];
			if (nulls[c])
				continue;
			char *cell = ah_alloc(a, lens[c] + 1);
			if (lens[c] <= CELL_BUF) {
				memcpy(cell, bufs + c * CELL_BUF, lens[c]);
			} else {
				/* Truncated: fetch the whole column into its own buffer. */
				MYSQL_BIND one = {0};
				one.buffer_type = MYSQL_TYPE_STRING;
				one.buffer = cell;
				one.buffer_length = lens[c];
				if (mysql_stmt_fetch_column(st, &one, (unsigned)c, 0) != 0)
					return fetch_failed(db, st);
			}
			out->v[r][c] = cell;
		}
	}
	mysql_stmt_free_result(st);
	return 0;
}

int ah_db_query(ah_db *db, ah_arena *a, ah_rows *out, const char *sql, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	MYSQL_STMT *st = run(db, sql, fmt, ap);
	va_end(ap);
	memset(out, 0, sizeof(*out));
	int rc = st ? fetch_rows(db, st, a, out) : AH_EFAIL;
	if (rc != 0) {
		ah_mx_db_error();
		ah_log_error("query failed: %s", db->error);
	}
	return rc;
}

int ah_db_exec(ah_db *db, unsigned long long *affected, const char *sql, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	MYSQL_STMT *st = run(db, sql, fmt, ap);
	va_end(ap);
	if (!st) {
		unsigned e = db->conn ? mysql_errno(db->conn) : 0;
		if (strstr(db->error, "Duplicate entry") || e == ER_DUP_ENTRY)
			return AH_ECONFLICT;
		ah_mx_db_error();
		ah_log_error("statement failed: %s", db->error);
		return AH_EFAIL;
	}
	if (affected)
		*affected = mysql_stmt_affected_rows(st);
	db->insert_id = mysql_stmt_insert_id(st);
	return 0;
}

bool ah_db_deadlocked(const ah_db *db)
{
	return db->last_errno == ER_LOCK_DEADLOCK || db->last_errno == ER_LOCK_WAIT_TIMEOUT;
}

bool ah_db_unavailable(const ah_db *db)
{
	return !db->conn || is_lost(db->last_errno);
}

unsigned long long ah_db_insert_id(const ah_db *db)
{
	return db->insert_id;
}

/* BEGIN may be retried on another connection (nothing ran yet); COMMIT never:
 * on a new connection it would commit nothing and report success. */
static int simple(ah_db *db, const char *q, bool may_retry)
{
	for (int attempt = 0; attempt < (db->nnodes > 2 ? db->nnodes : 2); attempt++) {
		if (!db->conn && (!may_retry || reconnect(db) != 0)) {
			ah_db_set_error(db, q, "connection lost");
			db->last_errno = CR_SERVER_LOST;
			return AH_EFAIL;
		}
		if (mysql_query(db->conn, q) == 0) {
			db->last_errno = 0;
			return 0;
		}
		db->last_errno = mysql_errno(db->conn);
		ah_db_set_error(db, q, mysql_error(db->conn));
		if (!is_lost(db->last_errno) || !may_retry)
			break;
		if (db->last_errno == ER_WSREP_NOT_READY && db->nnodes > 0)
			db->cur = (db->cur + 1) % db->nnodes;
		if (reconnect(db) != 0)
			break;
	}
	ah_mx_db_error();
	ah_log_error("%s", db->error);
	return AH_EFAIL;
}

int ah_db_begin(ah_db *db)
{
	int rc = simple(db, "START TRANSACTION", true);
	db->in_tx = rc == 0;
	return rc;
}

int ah_db_commit(ah_db *db)
{
	int rc = simple(db, "COMMIT", false);
	db->in_tx = false;
	return rc;
}

void ah_db_rollback(ah_db *db)
{
	db->in_tx = false;
	if (db->conn)
		mysql_rollback(db->conn);
}

const char *ah_db_error(const ah_db *db)
{
	return db->error;
}

int ah_db_ping(ah_db *db)
{
	if (db->conn && mysql_ping(db->conn) == 0)
		return 0;
	return reconnect(db);
}

int ah_db_exec_script(ah_db *db, const char *sql, ah_err *err)
{
	if (!db->conn && reconnect(db) != 0)
		return ah_err_set(err, AH_EFAIL, "%s", db->error);
	mysql_set_server_option(db->conn, MYSQL_OPTION_MULTI_STATEMENTS_ON);
	int rc = mysql_real_query(db->conn, sql, strlen(sql));
	/* Every statement's result must be consumed, even after an error. */
	while (rc == 0) {
		MYSQL_RES *res = mysql_store_result(db->conn);
		if (res)
			mysql_free_result(res);
		int next = mysql_next_result(db->conn);
		if (next == -1)
			break;
		if (next > 0)
			rc = next;
	}
	if (rc != 0)
		ah_err_set(err, AH_EFAIL, "%s", mysql_error(db->conn));
	mysql_set_server_option(db->conn, MYSQL_OPTION_MULTI_STATEMENTS_OFF);
	return rc ? AH_EFAIL : 0;
}
