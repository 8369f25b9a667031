/* Error codes and the error record that travels with them.
 * Fallible functions return 0 on success, one of the named negative codes for
 * failures a caller handles, or AH_EFAIL for anything else; the message goes into
 * an ah_err the caller passed in. */
#ifndef AH_CORE_ERR_H
#define AH_CORE_ERR_H

#include <stddef.h>

enum {
	AH_OK        = 0,
	AH_EFAIL     = -1,  /* unexpected: I/O, database, out of memory */
	AH_ENOTFOUND = -2,
	AH_ECONFLICT = -3,
	AH_EINVALID  = -4,
	AH_ETOOBIG   = -5,
	AH_EDENIED   = -6,
	AH_ETIMEOUT  = -7,
	AH_EDONE     = -8,  /* a response has already been written */
	AH_EBUSY     = -9,  /* out of capacity for now (sandbox budget): retry later */
	AH_ENOSPACE  = -10, /* the disk is full (ENOSPC, EDQUOT): HTTP 507 */
	AH_EMOUNT    = -11, /* a bucket mount failed: its message (mount, bucket) is the user's */
};

typedef struct ah_err {
	int code;
	char msg[512];
} ah_err;

/* Records code and a printf-style message; returns code so callers can
 * `return ah_err_set(err, AH_ENOTFOUND, "...")`. err may be NULL. */
int ah_err_set(ah_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* What a failed file write or create with errno e means: AH_ENOSPACE when
 * its disk or quota is full (ENOSPC, EDQUOT), else AH_EFAIL. */
int ah_err_disk(int e);

#endif
