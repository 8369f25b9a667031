/* Connecting (see internal.h): to the one configured server, or to a Galera
 * cluster's nodes in db_hosts' order from the one last used, passing over
 * nodes that are down or outside the primary component. */
#include "db/internal.h"
#include "core/log.h"

#include <stdio.h>
#include <string.h>

static MYSQL *connect_one(ah_db *db, const char *host, unsigned port, const char *sock)
{
	const ah_db_settings *s = &ah_settings_of(db->cfg)->db;
	MYSQL *m = mysql_init(NULL);
	if (!m) {
		ah_db_set_error(db, "connect", "out of memory");
		return NULL;
	}
	unsigned int timeout = 5;
	mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
	mysql_options(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
	mysql_options(m, MYSQL_INIT_COMMAND, "SET time_zone = '+00:00'");
	if (!mysql_real_connect(m, host, s->user, s->password, s->name, port, sock, 0)) {
		ah_db_set_error(db, "connect", mysql_error(m));
		mysql_close(m);
		return NULL;
	}
	return m;
}

/* A cluster node that accepts connections may still refuse work (1047 while
 * it is outside the primary component): such a node is passed over. */
static bool node_ready(ah_db *db, MYSQL *m)
{
	if (mysql_query(m, "SELECT 1") != 0) {
		ah_db_set_error(db, "connect", mysql_error(m));
		return false;
	}
	MYSQL_RES *res = mysql_store_result(m);
	if (res)
		mysql_free_result(res);
	return true;
}

/* The cluster's nodes from the current one on, in db_hosts' order. */
static int connect_cluster(ah_db *db)
{
	for (int i = 0; i < db->nnodes; i++) {
		int k = (db->cur + i) % db->nnodes;
		MYSQL *m = connect_one(db, db->nodes[k].host, db->nodes[k].port, NULL);
		if (m && node_ready(db, m)) {
			if (k != db->cur || i > 0)
				ah_log_warn("database: now on node %s:%u", db->nodes[k].host, db->nodes[k].port);
			db->cur = k;
			db->conn = m;
			return 0;
		}
		if (m)
			mysql_close(m);
		ah_log_warn("database node %s:%u: %s", db->nodes[k].host, db->nodes[k].port, db->error);
	}
	return AH_EFAIL;
}

int ah_db_connect(ah_db *db)
{
	const ah_db_settings *s = &ah_settings_of(db->cfg)->db;
	if (db->nnodes > 0)
		return connect_cluster(db);
	db->conn = connect_one(db, s->host, (unsigned)s->port, *s->socket ? s->socket : NULL);
	return db->conn ? 0 : AH_EFAIL;
}

/* db_hosts: "host:port,host:port,..." (a missing port is db_port). */
int ah_db_parse_nodes(ah_db *db, ah_err *err)
{
	const char *list = ah_settings_of(db->cfg)->db.hosts;
	unsigned defport = (unsigned)ah_settings_of(db->cfg)->db.port;
	while (list && *list) {
		size_t len = strcspn(list, ", ");
		if (len > 0) {
			if (db->nnodes == MAX_NODES)
				return ah_err_set(err, AH_EINVALID, "db_hosts: more than %d nodes", MAX_NODES);
			struct node *n = &db->nodes[db->nnodes++];
			if (len >= sizeof(n->host))
				return ah_err_set(err, AH_EINVALID, "db_hosts: host name too long");
			memcpy(n->host, list, len);
			n->host[len] = '\0';
			n->port = defport;
			char *colon = strrchr(n->host, ':');
			if (colon) {
				long long p = 0;
				*colon = '\0';
				if (ah_parse_ll(&p, colon + 1) != 0 || p < 1 || p > 65535 || !*n->host)
					return ah_err_set(err, AH_EINVALID, "db_hosts: bad entry %.*s", (int)len,
					                  list);
				n->port = (unsigned)p;
			}
		}
		list += len;
		list += strspn(list, ", ");
	}
	return 0;
}

