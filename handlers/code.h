/* Uploaded code of `local` agents. */
#ifndef AH_HANDLERS_CODE_H
#define AH_HANDLERS_CODE_H

#include "http/http.h"

/* Removes the stored tarball of an agent (agent deleted). */
void ah_code_remove(ah_req *r, const char *agent_id);

#endif
