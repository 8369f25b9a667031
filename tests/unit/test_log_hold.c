/* Unit test of held log lines (ah_log_hold, lib/core/log.c): INFO lines wait
 * until a flush, a WARN or ERROR line writes them first and then itself (the
 * order kept), a child made by fork() never writes its parent's held lines,
 * and holding off writes what is held. Printed as TAP. */
#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

static FILE *out;

/* What the log file holds now. */
static char *text(void)
{
	static char buf[16384];
	fflush(out);
	size_t n = (size_t)pread(fileno(out), buf, sizeof buf - 1, 0);
	buf[n < sizeof buf ? n : 0] = '\0';
	return buf;
}

static bool before(const char *a, const char *b)
{
	const char *t = text(), *pa = strstr(t, a), *pb = strstr(t, b);
	return pa && pb && pa < pb;
}

int main(void)
{
	ah_log_set_program("test-hold");
	out = tmpfile();
	int saved = dup(STDERR_FILENO);
	dup2(fileno(out), STDERR_FILENO);
	ah_log_hold(true);
	ah_log_info("first line");
	ah_log_info("second line");
	bool held = strstr(text(), "first line") == NULL && ah_log_holding();
	ah_log_flush();
	bool flushed = before("first line", "second line") && !ah_log_holding();
	ah_log_info("third line");
	ah_log_warn("a warning");
	bool ordered = before("third line", "a warning") && !ah_log_holding();
	ah_log_info("parent's line");
	pid_t pid = fork();
	if (pid == 0) {
		ah_log_error("child's error");
		_exit(0);
	}
	waitpid(pid, NULL, 0);
	bool once = strstr(text(), "child's error") && !strstr(text(), "parent's line");
	ah_log_hold(false);
	const char *p = strstr(text(), "parent's line");
	bool off = p && !strstr(p + 1, "parent's line") && !ah_log_holding();
	ah_log_info("unheld");
	bool direct = strstr(text(), "unheld") != NULL;
	dup2(saved, STDERR_FILENO);
	close(saved);
	ok(held, "INFO lines are held");
	ok(flushed, "a flush writes them, in order");
	ok(ordered, "a WARN line writes the held lines first, then itself");
	ok(once, "a forked child writes its own lines, never its parent's held ones");
	ok(off, "holding off writes the held line, once");
	ok(direct, "not holding: a line is written at once");
	return tap_done();
}
