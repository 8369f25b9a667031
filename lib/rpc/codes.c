/* See rpc.h: the error codes an answer carries, by name. */
#include "rpc/rpc.h"

#include <string.h>

static const char *const names[AH_RPC_CODE_COUNT] = {
	[AH_RPC_OK] = "ok",
	[AH_RPC_FAILED] = "failed",
	[AH_RPC_BUSY] = "busy",
	[AH_RPC_MOUNT] = "mount_failed",
	[AH_RPC_INVALID] = "invalid",
	[AH_RPC_ELSEWHERE] = "wrong_runner",
	[AH_RPC_OVERLOADED] = "overloaded",
};

const char *ah_rpc_code_name(ah_rpc_code c)
{
	return (unsigned)c < AH_RPC_CODE_COUNT ? names[c] : names[AH_RPC_FAILED];
}

ah_rpc_code ah_rpc_code_parse(const char *name, bool ok)
{
	if (!name)
		return ok ? AH_RPC_OK : AH_RPC_FAILED;
	for (unsigned c = 0; c < AH_RPC_CODE_COUNT; c++)
		if (strcmp(name, names[c]) == 0)
			return (ah_rpc_code)c;
	return AH_RPC_FAILED;
}

ah_rpc_code ah_rpc_code_of(int rc)
{
	switch (rc) {
	case AH_OK: return AH_RPC_OK;
	case AH_EBUSY: return AH_RPC_BUSY;
	case AH_EMOUNT: return AH_RPC_MOUNT;
	case AH_EINVALID: return AH_RPC_INVALID;
	default: return AH_RPC_FAILED;
	}
}
