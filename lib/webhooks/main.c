/* agenthost-webhooks: the webhook delivery daemon (issue 28). Start-up
 * (config, log, master key, database), the delivery loop until SIGTERM or
 * SIGINT, then a short grace for attempts in flight. Any number may run, on
 * any hosts: they share the queue table (daemon.c says how). */
#include "webhooks/daemon.h"
#include "crypto/crypto.h"
#include "core/log.h"

#include <signal.h>
#include <sodium.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

/* MariaDB may still be starting (scripts start everything at once). */
static int open_db_patiently(ah_db **db, const ah_config *cfg, ah_err *err)
{
	for (int i = 0; i < 30 && !stop_flag; i++) {
		if (ah_db_open(db, cfg, err) == 0)
			return 0;
		ah_log_warn("database not reachable (%s); retrying", err->msg);
		sleep(1);
	}
	return AH_EFAIL;
}

int main(int argc, char **argv)
{
	ah_config *cfg = NULL;
	ah_db *db = NULL;
	ah_err err = {0};
	ah_log_set_program("agenthost-webhooks");
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	const char *path = argc > 2 && strcmp(argv[1], "--config") == 0 ? argv[2] : NULL;
	if (sodium_init() < 0 || ah_config_load(&cfg, path, &err) != 0 ||
	    ah_log_configure(cfg, &err) != 0 || ah_crypto_init(cfg, 0, &err) != 0 ||
	    curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
	    open_db_patiently(&db, cfg, &err) != 0) {
		ah_log_error("start-up failed: %s", err.msg[0] ? err.msg : "libsodium or libcurl");
		return 1;
	}
	const ah_webhook_settings *set = &ah_settings_of(cfg)->webhook;
	ah_whd d = {.cfg = cfg, .set = set, .db = db, .policy = ah_webhook_policy(set),
	            .stop = &stop_flag, .capacity = (int)set->concurrency};
	if (!(d.multi = curl_multi_init())) {
		ah_log_error("start-up failed: curl_multi_init");
		return 1;
	}
	/* One connection per receiver host is not a limit here: many attempts
	 * to one slow receiver run side by side. */
	curl_multi_setopt(d.multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)d.capacity);
	ah_log_info("ready: up to %d deliveries at once", d.capacity);
	int rc = ah_whd_run(&d);
	curl_multi_cleanup(d.multi);
	ah_db_close(db);
	ah_config_free(cfg);
	curl_global_cleanup();
	ah_log_info("stopped");
	return rc;
}
