/* agenthost-admin: the operator's command line.
 *   agenthost-admin migrate
 *   agenthost-admin config check [FILE] [--example FILE]
 *   agenthost-admin user create EMAIL [--plan free|pro|enterprise] [--quota-bytes N]
 *   agenthost-admin user disable EMAIL | user enable EMAIL
 *   agenthost-admin user delete EMAIL --yes
 *   agenthost-admin user identities EMAIL
 *   agenthost-admin user unlink EMAIL ISSUER SUBJECT
 *   agenthost-admin key create EMAIL [--name NAME]
 *   agenthost-admin purge-history [--days N]
 * `user create` and `key create` print the new API key as their last line, so
 * scripts can take it with `tail -n 1`. */
#include "admin/admin.h"
#include "core/log.h"
#include "crypto/crypto.h"

#include <stdio.h>
#include <string.h>

static int usage(void)
{
	fputs("usage: agenthost-admin migrate\n"
	      "       agenthost-admin config check [FILE] [--example FILE]\n"
	      "       agenthost-admin user create EMAIL [--plan free|pro|enterprise] [--quota-bytes N]\n"
	      "       agenthost-admin user disable|enable EMAIL\n"
	      "       agenthost-admin user delete EMAIL --yes\n"
	      "       agenthost-admin user identities EMAIL\n"
	      "       agenthost-admin user unlink EMAIL ISSUER SUBJECT\n"
	      "       agenthost-admin key create EMAIL [--name NAME]\n"
	      "       agenthost-admin purge-history [--days N]\n", stderr);
	return 2;
}

/* Value of --name in argv, or def. */
static const char *opt(int argc, char **argv, const char *name, const char *def)
{
	for (int i = 0; i + 1 < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return argv[i + 1];
	return def;
}

static int config_check(int argc, char **argv)
{
	const char *file = argc >= 4 && strcmp(argv[3], "--example") != 0 ? argv[3] : NULL;
	if (argc > 3 + (file != NULL) && (argc != 5 + (file != NULL) ||
	                                  strcmp(argv[3 + (file != NULL)], "--example") != 0))
		return usage();
	return ah_admin_config_check(file, opt(argc, argv, "--example", NULL));
}

static int dispatch(ah_admin *ad, int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "migrate") == 0)
		return ah_admin_migrate(ad);
	if (argc >= 4 && strcmp(argv[1], "user") == 0 && strcmp(argv[2], "create") == 0)
		return ah_admin_user_create(ad, argv[3], opt(argc, argv, "--plan", "free"),
		                            opt(argc, argv, "--quota-bytes", NULL));
	if (argc >= 4 && strcmp(argv[1], "user") == 0 &&
	    (strcmp(argv[2], "disable") == 0 || strcmp(argv[2], "enable") == 0))
		return ah_admin_user_set_disabled(ad, argv[3], strcmp(argv[2], "disable") == 0);
	if (argc >= 4 && strcmp(argv[1], "user") == 0 && strcmp(argv[2], "delete") == 0)
		return ah_admin_user_delete(ad, argv[3], argc == 5 && strcmp(argv[4], "--yes") == 0);
	if (argc == 4 && strcmp(argv[1], "user") == 0 && strcmp(argv[2], "identities") == 0)
		return ah_admin_user_identities(ad, argv[3]);
	if (argc == 6 && strcmp(argv[1], "user") == 0 && strcmp(argv[2], "unlink") == 0)
		return ah_admin_user_unlink(ad, argv[3], argv[4], argv[5]);
	if (argc >= 4 && strcmp(argv[1], "key") == 0 && strcmp(argv[2], "create") == 0)
		return ah_admin_key_create(ad, argv[3], opt(argc, argv, "--name", "Default"));
	if (argc >= 2 && strcmp(argv[1], "purge-history") == 0)
		return ah_admin_purge_history(ad, opt(argc, argv, "--days", NULL));
	return usage();
}

int main(int argc, char **argv)
{
	ah_admin ad = {0};
	ah_err err = {0};
	ah_log_set_program("agenthost-admin");
	if (argc < 2)
		return usage();
	/* Before anything is opened: it runs before the services start. */
	if (argc >= 3 && strcmp(argv[1], "config") == 0 && strcmp(argv[2], "check") == 0)
		return config_check(argc, argv);
	if (ah_config_load(&ad.cfg, NULL, &err) != 0 || ah_crypto_init(ad.cfg, 1, &err) != 0 ||
	    ah_db_open(&ad.db, ad.cfg, &err) != 0) {
		fprintf(stderr, "agenthost-admin: %s\n", err.msg);
		return 1;
	}
	ad.arena = ah_arena_new();
	int rc = dispatch(&ad, argc, argv);
	ah_arena_destroy(ad.arena);
	ah_db_close(ad.db);
	ah_config_free(ad.cfg);
	return rc;
}
