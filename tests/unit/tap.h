/* The few lines of TAP every unit test prints: `ok N - what` / `not ok N - what`,
 * then the plan, with the exit status meson reads. Header-only on purpose: each
 * test is one executable. */
#ifndef AH_TESTS_TAP_H
#define AH_TESTS_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int ntest, nfail;

static void ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3), unused));
static void ok(int cond, const char *fmt, ...)
{
	va_list ap;
	printf("%sok %d - ", cond ? "" : "not ", ++ntest);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	if (!cond)
		nfail++;
}

/* Prints the plan and returns main's exit status. */
static int __attribute__((unused)) tap_done(void)
{
	printf("1..%d\n", ntest);
	return nfail ? 1 : 0;
}

#endif
