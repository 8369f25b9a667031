/* agenthost-api: the resources of handlers/ served by lib/api's workers.
 *
 * Start-up work differs between the pools. The invoke pool loads the tokenizer
 * vocabulary once per worker (a few MB, a few hundred ms) and checks the
 * prices, so that a bad configuration stops the service at start rather than
 * mis-billing every invocation. The CRUD pool needs neither. Both open the
 * managed files' storage backend. */
#include "api/api.h"
#include "core/money.h"
#include "tokenize/tokenize.h"
#include "files.h"
#include "routes.h"

static int init_pool(const ah_config *cfg, int pool, ah_err *err)
{
	/* Both pools: invocations report the session files they produced. */
	int rc = ah_files_init(cfg, err);
	if (rc != 0)
		return rc;
	/* Prices are checked by ah_config_load with every other key. */
	if (pool != AH_POOL_INVOKE)
		return 0;
	const char *vocab = ah_cfg_str(cfg, AH_CFG_TOKENIZER_VOCAB);
	char msg[256];
	if (ah_tokenize_init(*vocab ? vocab : NULL, msg, sizeof(msg)) != 0)
		return ah_err_set(err, AH_EFAIL, "tokenizer: %s", msg);
	return 0;
}

int main(int argc, char **argv)
{
	static const ah_api_app app = {.routes = ah_route_tables, .init_pool = init_pool};
	return ah_api_main(argc, argv, &app);
}
