/* agenthost-admin purge-history: the runner's retention sweep, all at once
 * (after lowering history_retention_days, or where no runner runs). */
#include "admin/admin.h"
#include "db/history.h"
#include "files/files.h"

#include <limits.h>
#include <stdio.h>

/* The file store's prompts and responses of invocations gone (these and any
 * before), as the runner's sweep does every minute. */
static int release_blobs(ah_admin *ad)
{
	ah_store *store;
	ah_err err = {0};
	int released = 0;
	if (ah_store_open(&store, ad->cfg, &err) != 0) {
		fprintf(stderr, "agenthost-admin: file store: %s\n", err.msg);
		return 1;
	}
	int rc = ah_history_blobs_sweep(ad->db, store, ad->arena, NULL, 500, INT_MAX, &released, &err);
	ah_store_close(store);
	if (rc != 0) {
		fprintf(stderr, "agenthost-admin: %s\n", err.msg);
		return 1;
	}
	printf("released %d prompts and responses from the file store\n", released);
	return 0;
}

int ah_admin_purge_history(ah_admin *ad, const char *days_arg)
{
	long long days = ah_settings_of(ad->cfg)->host.history_retention_days, purged = 0;
	ah_err err = {0};
	if (days_arg && (ah_parse_ll(&days, days_arg) != 0 || days < 0)) {
		fprintf(stderr, "agenthost-admin: --days should be a whole number of days, 0 or more\n");
		return 2;
	}
	if (days == 0) {
		printf("history_retention_days is 0: the history is kept forever\n");
		return 0;
	}
	/* Batches until one comes back short: the same small transactions as the runner's. */
	if (ah_history_purge(ad->db, days, AH_HISTORY_BATCH, (long long)1 << 40, &purged, &err) != 0) {
		fprintf(stderr, "agenthost-admin: %s (%lld purged before)\n", err.msg, purged);
		return 1;
	}
	printf("purged %lld invocations older than %lld days\n", purged, days);
	return release_blobs(ad);
}
