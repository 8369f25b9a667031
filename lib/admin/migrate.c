/* Numbered migrations from schema/, applied in name order, each recorded in
 * schema_migrations so running migrate again changes nothing. A lock row keeps
 * two hosts that start at once from applying the same file twice: not
 * GET_LOCK, which on a Galera cluster locks one node only. The row is taken by
 * a conditional UPDATE (its affected rows decide; two nodes' UPDATEs at once
 * end in one winner and one certification conflict, which db.c retries and
 * which then sees the row taken). A lease, not a session, holds it, so a
 * migrate that was killed blocks the next one for LEASE_S at most.
 *
 * A file is recorded only once all of it ran, but MariaDB commits each DDL
 * statement by itself: a migration that stops half way (a full disk) is run
 * whole again by the next migrate. So each statement of a migration is a
 * no-op when already applied (CREATE TABLE / ADD COLUMN IF NOT EXISTS), and
 * adds only what the previous version runs with (tests/integration/
 * test_migrate.py), which keeps serving until the upgrade completes. */
#include "admin/admin.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char SQL_TABLE[] =
	"CREATE TABLE IF NOT EXISTS schema_migrations (version VARCHAR(255) NOT NULL PRIMARY KEY,"
	" applied_at DATETIME(3) NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";
static const char SQL_APPLIED[] = "SELECT 1 FROM schema_migrations WHERE version = ?";
static const char SQL_RECORD[] =
	"INSERT INTO schema_migrations (version, applied_at) VALUES (?, NOW(3))";
static const char SQL_LOCK_TABLE[] =
	"CREATE TABLE IF NOT EXISTS schema_lock (id TINYINT NOT NULL PRIMARY KEY,"
	" holder VARCHAR(128) NULL, lease_until DATETIME(3) NULL) ENGINE=InnoDB DEFAULT CHARSET=ascii";
static const char SQL_LOCK_ROW[] = "INSERT IGNORE INTO schema_lock (id) VALUES (1)";
static const char SQL_LOCK[] =
	"UPDATE schema_lock SET holder = ?, lease_until = NOW(3) + INTERVAL 600 SECOND"
	" WHERE id = 1 AND (holder IS NULL OR lease_until < NOW(3))";
static const char SQL_UNLOCK[] =
	"UPDATE schema_lock SET holder = NULL, lease_until = NULL WHERE id = 1 AND holder = ?";
#define LOCK_WAIT_S 120

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static char *slurp(ah_arena *a, const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = ah_alloc(a, (size_t)(n < 0 ? 0 : n) + 1);
	size_t got = fread(buf, 1, (size_t)(n < 0 ? 0 : n), f);
	buf[got] = '\0';
	fclose(f);
	return buf;
}

/* MariaDB's words for a full disk: ER_RECORD_FILE_FULL (InnoDB could not
 * extend a file) and ENOSPC in a file error. */
static int disk_full(const char *msg)
{
	return strstr(msg, " is full") || strstr(msg, "Errcode: 28") || strstr(msg, "No space left");
}

static int apply(ah_admin *ad, const char *dir, const char *file)
{
	ah_rows rows;
	ah_err err = {0};
	if (ah_db_query(ad->db, ad->arena, &rows, SQL_APPLIED, "s", file) != 0)
		return 1;
	if (rows.n > 0)
		return 0;
	char *sql = slurp(ad->arena, ah_sprintf(ad->arena, "%s/%s", dir, file));
	if (!sql || ah_db_exec_script(ad->db, sql, &err) != 0) {
		fprintf(stderr, "agenthost-admin: migration %s failed: %s\n", file,
		        sql ? err.msg : "cannot read file");
		if (sql && disk_full(err.msg))
			fprintf(stderr, "agenthost-admin: the database's disk is full: free space where"
			                " MariaDB keeps its data (its datadir), then migrate again\n");
		return 1;
	}
	if (ah_db_exec(ad->db, NULL, SQL_RECORD, "s", file) != 0) {
		/* Run, not recorded: the next migrate runs it again (see above). */
		fprintf(stderr, "agenthost-admin: migration %s ran but was not recorded: %s\n", file,
		        ah_db_error(ad->db));
		return 1;
	}
	printf("applied %s\n", file);
	return 0;
}

/* Takes the lock row, waiting for another migrate to finish. */
static int lock_schema(ah_admin *ad, const char *holder)
{
	if (ah_db_exec(ad->db, NULL, SQL_LOCK_TABLE, "") != 0 ||
	    ah_db_exec(ad->db, NULL, SQL_LOCK_ROW, "") != 0)
		return 1;
	for (int i = 0; i < LOCK_WAIT_S * 4; i++) {
		unsigned long long n = 0;
		if (ah_db_exec(ad->db, &n, SQL_LOCK, "s", holder) != 0)
			return 1;
		if (n == 1)
			return 0;
		if (i == 0)
			fprintf(stderr, "agenthost-admin: another migrate is running; waiting\n");
		usleep(250000);
	}
	fprintf(stderr, "agenthost-admin: the schema lock was not released in %d s\n", LOCK_WAIT_S);
	return 1;
}

int ah_admin_migrate(ah_admin *ad)
{
	char host[64] = "", *holder;
	const char *dir = ah_settings_of(ad->cfg)->host.schema_dir;
	struct dirent **list;
	int n = scandir(dir, &list, NULL, by_name), rc = 0;
	if (n < 0) {
		fprintf(stderr, "agenthost-admin: cannot read %s\n", dir);
		return 1;
	}
	gethostname(host, sizeof(host) - 1);
	holder = ah_sprintf(ad->arena, "%s:%ld", host, (long)getpid());
	if (lock_schema(ad, holder) != 0 || ah_db_exec(ad->db, NULL, SQL_TABLE, "") != 0)
		rc = 1;
	for (int i = 0; i < n; i++) {
		size_t len = strlen(list[i]->d_name);
		if (rc == 0 && len > 4 && strcmp(list[i]->d_name + len - 4, ".sql") == 0)
			rc = apply(ad, dir, list[i]->d_name);
		free(list[i]);
	}
	free(list);
	ah_db_exec(ad->db, NULL, SQL_UNLOCK, "s", holder);
	return rc;
}
