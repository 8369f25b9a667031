/* Exec's pipes, runner side (exec.c runs the program): stdout into memory or a
 * file under its cap, stderr into the log line by line (escaped, capped) with
 * its last 4 KiB kept, the prompt into stdin as the program takes it. */
#include "sandbox/internal.h"
#include "sandbox/exec_io.h"

#include "core/log.h"
#include "core/redact.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One stderr line, as the program wrote it, into the runner's log under the
 * tag (for a run, inv=<invocation id>), escaped (ah_log_escape): the program
 * cannot start a line of its own, forge one of the runner's, or send control
 * sequences to whoever reads the log. A line whose escaped form is longer
 * than LOG_TEXT_MAX continues on the next entry. After LOG_MAX bytes a run
 * logs one note and nothing more, so no program can fill the disk. */
void sb_io_log_line(io *s)
{
	const char *tag = s->tag ? s->tag : "sandbox";
	size_t off = 0;
	do {
		char text[LOG_TEXT_MAX];
		size_t n;
		if (s->log_cut)
			break;
		off += ah_log_escape(text, &n, sizeof text, s->line + off, s->line_len - off);
		if (s->logged + n > LOG_MAX) {
			ah_log_warn("[%s] stderr over %d bytes: the rest of it is not logged", tag, LOG_MAX);
			s->log_cut = true;
			break;
		}
		ah_log_info("[%s] %s", tag, text);
		s->logged += n + 1;
	} while (off < s->line_len);
	s->line_len = 0;
}

/* How many bytes at the end of a full line buffer start a UTF-8 character
 * that the next bytes complete: they begin the next line instead of being
 * escaped as broken halves. */
static size_t partial_char(const char *b, size_t n)
{
	for (size_t k = 1; k <= 3 && k <= n; k++) {
		unsigned char c = (unsigned char)b[n - k];
		if ((c & 0xC0) == 0x80)
			continue;
		size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
		return need > k ? k : 0;
	}
	return 0;
}

static void log_full_line(io *s)
{
	size_t len = s->line_len, keep = partial_char(s->line, len);
	s->line_len = len - keep;
	sb_io_log_line(s);
	memmove(s->line, s->line + len - keep, keep);
	s->line_len = keep;
}

void sb_io_on_stderr(io *s, const char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (b[i] == '\n') {
			sb_io_log_line(s);
			continue;
		}
		if (s->line_len == sizeof s->line)
			log_full_line(s);
		s->line[s->line_len++] = b[i];
	}
	if (n >= TAIL_MAX) {
		memcpy(s->tail, b + n - TAIL_MAX, TAIL_MAX);
		s->tail_len = TAIL_MAX;
		return;
	}
	if (s->tail_len + n > TAIL_MAX) {
		size_t drop = s->tail_len + n - TAIL_MAX;
		memmove(s->tail, s->tail + drop, s->tail_len - drop);
		s->tail_len -= drop;
	}
	memcpy(s->tail + s->tail_len, b, n);
	s->tail_len += n;
}

/* All of b into the output file; false when it cannot take it. */
static bool write_out_file(io *s, const char *b, size_t n)
{
	while (n > 0) {
		ssize_t w = write(s->out_file, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			s->truncated = true; /* a full host disk: as good as over the cap */
			return false;
		}
		b += w;
		n -= (size_t)w;
	}
	return true;
}

/* Returns false when the cap is exceeded (or the output file failed). */
bool sb_io_on_stdout(io *s, const char *b, size_t n)
{
	if (s->out_len + n > s->max_out) {
		n = s->max_out - s->out_len;
		s->truncated = true;
	}
	if (s->out_file >= 0) {
		s->out_len += n;
		return write_out_file(s, b, n) && !s->truncated;
	}
	if (s->out_len + n + 1 > s->out_cap) {
		size_t cap = s->out_cap ? s->out_cap : 16384;
		while (cap < s->out_len + n + 1)
			cap *= 2;
		char *o = realloc(s->out, cap);
		if (!o) {
			s->truncated = true;
			return false;
		}
		s->out = o;
		s->out_cap = cap;
	}
	memcpy(s->out + s->out_len, b, n);
	s->out_len += n;
	return !s->truncated;
}

void sb_io_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Writes what the pipe takes; EPIPE (the program closed stdin) just stops. */
void sb_io_feed_stdin(io *s)
{
	while (s->in_off < s->in_len) {
		loff_t at = (loff_t)s->in_off;
		ssize_t n = s->in_is_file
		                ? splice(s->in_file, &at, s->fd_in, NULL, s->in_len - s->in_off, SPLICE_F_NONBLOCK)
		                : write(s->fd_in, s->in + s->in_off, s->in_len - s->in_off);
		if (n > 0) {
			s->in_off += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n < 0 && errno == EPIPE) {
			/* Consume the SIGPIPE pending on this thread (it is blocked). */
			sigset_t set;
			sigemptyset(&set);
			sigaddset(&set, SIGPIPE);
			sigtimedwait(&set, NULL, &(struct timespec){ 0, 0 });
		}
		break;
	}
	sb_io_close_fd(&s->fd_in);
}

void sb_io_drain(io *s, int *fd, bool is_out, bool *kill_now)
{
	char b[65536];
	ssize_t n = read(*fd, b, sizeof b);
	if (n > 0) {
		if (s->on_output)
			s->on_output(s->output_ctx, b, (size_t)n);
		if (!is_out && s->rd)
			ah_redact_write(s->rd, b, (size_t)n); /* then into sb_io_on_stderr */
		else if (!is_out)
			sb_io_on_stderr(s, b, (size_t)n);
		else if (!s->truncated) {
			size_t before = s->out_len;
			if (!sb_io_on_stdout(s, b, (size_t)n))
				*kill_now = true;
			if (s->on_stdout && s->out_len > before) /* what the cap let in */
				s->on_stdout(s->stdout_ctx, b, s->out_len - before);
		}
	} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		sb_io_close_fd(fd);
	}
}
