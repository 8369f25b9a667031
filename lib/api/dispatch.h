/* Handling of one accepted FastCGI request. */
#ifndef AH_API_DISPATCH_H
#define AH_API_DISPATCH_H

#include "http/http.h"

/* r has arena, fcgi, db and cfg set; everything else is filled here. */
void ah_dispatch(ah_req *r);

#endif
