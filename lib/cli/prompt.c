/* Reading from the user: a line typed at the terminal, a secret typed without
 * echo (or piped on stdin: secrets never need to be on the command line, where
 * other local users can read them in /proc), a yes/no question. */
#include "cli/cli.h"
#include "core/util.h"

#include <signal.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

int ah_cli_read_all(struct ah_cli *c, FILE *f, size_t cap, char **out, size_t *len, ah_err *err)
{
	char *p = ah_alloc(c->a, cap + 2);
	size_t n = fread(p, 1, cap + 1, f);
	if (ferror(f))
		return ah_err_set(err, AH_EFAIL, "cannot read the input");
	if (n > cap)
		return ah_cli_usage(err, "the input is larger than %zu bytes", cap);
	p[n] = 0;
	*out = p;
	if (len)
		*len = n;
	return 0;
}

static int read_line(struct ah_cli *c, size_t cap, char **out, ah_err *err)
{
	char *p = ah_alloc(c->a, cap + 2);
	if (!fgets(p, (int)cap + 2, stdin))
		return ah_cli_usage(err, "no input");
	ah_chomp(p);
	*out = p;
	return 0;
}

int ah_cli_ask(struct ah_cli *c, const char *question, const char *def, char **out, ah_err *err)
{
	if (!c->tty_in)
		return ah_cli_usage(err, "%s: not on a terminal; pass it as an option", question);
	if (def)
		fprintf(stderr, "%s [%s]: ", question, def);
	else
		fprintf(stderr, "%s: ", question);
	fflush(stderr);
	int rc = read_line(c, 4096, out, err);
	if (!rc && !**out && def)
		*out = ah_strdup(c->a, def);
	return rc;
}

/* The terminal's settings while echo is off, put back if the user interrupts
 * the question: a shell left without echo is a confusing place. */
static struct termios saved;

static void restore_and_die(int sig)
{
	tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void on_interrupt(void (*fn)(int))
{
	signal(SIGINT, fn);
	signal(SIGTERM, fn);
	signal(SIGHUP, fn);
}

int ah_cli_read_secret(struct ah_cli *c, const char *question, size_t cap, char **out, ah_err *err)
{
	if (!c->tty_in) {
		int rc = ah_cli_read_all(c, stdin, cap + 2, out, NULL, err);
		if (rc)
			return rc;
		ah_chomp(*out);
		return strlen(*out) > cap ? ah_cli_usage(err, "the value is larger than %zu bytes", cap) : 0;
	}
	struct termios old, quiet;
	if (tcgetattr(STDIN_FILENO, &old) != 0)
		return ah_err_set(err, AH_EFAIL, "cannot turn off echo on the terminal");
	quiet = old;
	quiet.c_lflag &= ~(tcflag_t)ECHO;
	quiet.c_lflag |= ECHONL;
	/* Echo off before the question appears, so nothing typed after it is
	 * shown; and nothing typed is discarded (TCSANOW, not TCSAFLUSH). */
	saved = old;
	on_interrupt(restore_and_die);
	if (tcsetattr(STDIN_FILENO, TCSANOW, &quiet) != 0) {
		on_interrupt(SIG_DFL);
		return ah_err_set(err, AH_EFAIL, "cannot turn off echo on the terminal");
	}
	fprintf(stderr, "%s: ", question);
	fflush(stderr);
	int rc = read_line(c, cap, out, err);
	tcsetattr(STDIN_FILENO, TCSANOW, &old);
	on_interrupt(SIG_DFL);
	return rc;
}

bool ah_cli_confirm(struct ah_cli *c, const char *question)
{
	char line[16];
	if (!c->tty_in)
		return false;
	fprintf(stderr, "%s [y/N] ", question);
	fflush(stderr);
	return fgets(line, sizeof(line), stdin) && (line[0] == 'y' || line[0] == 'Y');
}
