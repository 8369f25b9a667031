/* See lockorder.h. Each thread counts the locks it holds by rank. */
#include "runner/lockorder.h"
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void (*ah_runner_violation_hook)(const char *what);

void ah_runner_violation(const char *fmt, ...)
{
	char what[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	if (ah_runner_violation_hook) {
		ah_runner_violation_hook(what);
		return;
	}
	ah_log_error("internal error: %s", what);
#ifndef NDEBUG
	abort();
#endif
}

#ifndef NDEBUG
static _Thread_local int held[AH_LOCK_RANKS];

void ah_lock_check(enum ah_lock_rank r)
{
	for (int i = r; i < AH_LOCK_RANKS; i++)
		if (held[i] > 0)
			ah_runner_violation("lock order: rank %d taken with rank %d held", (int)r, i);
}

void ah_lock_note(enum ah_lock_rank r, int d)
{
	held[r] += d;
	if (held[r] < 0)
		ah_runner_violation("lock order: rank %d let go but not held", (int)r);
}
#endif
