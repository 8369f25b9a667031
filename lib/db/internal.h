/* The inside of an ah_db, shared by db.c (statements, transactions) and
 * nodes.c (connecting: one server, or a cluster's nodes in turn). */
#ifndef AH_DB_INTERNAL_H
#define AH_DB_INTERNAL_H

#include "db/db.h"

#include <mysql.h>
#include <stdbool.h>

#define CACHE_SIZE 256
#define MAX_NODES 16
/* Galera's "WSREP has not yet prepared node for application use": the node
 * is not in the primary component (partitioned, joining, shutting down). */
#define ER_WSREP_NOT_READY 1047
#define MAX_PARAMS 48 /* a budget charge binds 42 (handlers/budgets.c) */
#define CELL_BUF 512

struct cached {
	const char *sql;
	MYSQL_STMT *stmt;
};

struct node {
	char host[256];
	unsigned port;
};

struct ah_db {
	MYSQL *conn;
	struct node nodes[MAX_NODES];
	int nnodes, cur;       /* db_hosts, and the one connected to (or tried next) */
	const ah_config *cfg;
	struct cached cache[CACHE_SIZE];
	bool in_tx;
	unsigned long long insert_id;
	unsigned last_errno;   /* of the last statement that failed; 0 after one that ran */
	char error[512];
};

void ah_db_set_error(ah_db *db, const char *what, const char *msg);
/* Connects db->conn: db_socket/db_host, or the first of db_hosts' nodes, from
 * db->cur on, that is ready. 0 or AH_EFAIL (message in db->error). */
int ah_db_connect(ah_db *db);
/* db_hosts into db->nodes. */
int ah_db_parse_nodes(ah_db *db, ah_err *err);

#endif
