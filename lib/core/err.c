/* See err.h. */
#include "core/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

int ah_err_set(ah_err *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
		err->code = code;
	}
	return code;
}

int ah_err_disk(int e)
{
	return e == ENOSPC || e == EDQUOT ? AH_ENOSPACE : AH_EFAIL;
}
