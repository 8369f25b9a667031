/* Start-up work that differs between the CRUD and the invoke pool. */
#include "api/worker.h"

int ah_worker_init_pool(const ah_config *cfg, int pool, ah_err *err)
{
	(void)cfg;
	(void)pool;
	(void)err;
	return 0;
}
