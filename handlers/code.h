/* Uploaded code of `local` agents. */
#ifndef AH_HANDLERS_CODE_H
#define AH_HANDLERS_CODE_H

#include "http/http.h"

/* Removes the stored tarball of an agent (agent deleted). */
void ah_code_remove(ah_req *r, const char *agent_id);
/* Drops the agent's reference to a blob it kept in the file store (its
 * uploaded code or its image) when it no longer names it; NULL is a no-op. */
void ah_code_release(ah_req *r, const char *sha);

#endif
