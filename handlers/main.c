/* agenthost-api: the resources of handlers/ served by lib/api's workers.
 *
 * Start-up work differs between the pools. The invoke pool loads the tokenizer
 * vocabulary once per worker (a few MB, a few hundred ms) and checks the
 * prices, so that a bad configuration stops the service at start rather than
 * mis-billing every invocation. The CRUD pool needs neither. Both open the
 * managed files' storage backend. */
#include "api/api.h"
#include "core/log.h"
#include "crypto/crypto.h"
#include "core/money.h"
#include "tokenize/tokenize.h"
#include "files_api.h"
#include "routes.h"
#include "schedules.h"

#include <string.h>

static int init_pool(const ah_config *cfg, int pool, ah_err *err)
{
	/* Both pools: invocations report the session files they produced. */
	int rc = ah_files_init(cfg, err);
	if (rc != 0)
		return rc;
	/* Prices are checked by ah_config_load with every other key. */
	if (pool != AH_POOL_INVOKE)
		return 0;
	const char *vocab = ah_settings_of(cfg)->invoke.tokenizer_vocab;
	char msg[256];
	if (ah_tokenize_init(*vocab ? vocab : NULL, msg, sizeof(msg)) != 0)
		return ah_err_set(err, AH_EFAIL, "tokenizer: %s", msg);
	return 0;
}

/* `agenthost-api --scheduler [CONFIG]`: the scheduler alone, in the
 * foreground (a host that only runs schedules; tests race two of them). */
static int scheduler_alone(int argc, char **argv)
{
	ah_config *cfg = NULL;
	ah_err err = {0};
	ah_log_set_program("agenthost-api[scheduler]");
	if (ah_config_load(&cfg, argc > 2 ? argv[2] : NULL, &err) != 0 ||
	    ah_log_configure(cfg, &err) != 0 || ah_crypto_init(cfg, 0, &err) != 0) {
		ah_log_error("%s", err.msg);
		ah_config_free(cfg);
		return 1;
	}
	int rc = ah_scheduler_run(cfg);
	ah_config_free(cfg);
	return rc;
}

int main(int argc, char **argv)
{
	static const ah_api_app app = {.routes = ah_route_tables, .init_pool = init_pool,
	                               .background = ah_scheduler_run};
	if (argc > 1 && strcmp(argv[1], "--scheduler") == 0)
		return scheduler_alone(argc, argv);
	return ah_api_main(argc, argv, &app);
}
