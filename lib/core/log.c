/* One line per call, written with a single write(2) so lines of concurrent
 * workers sharing the log file never interleave (held lines: several whole
 * lines in one write). log_format = json makes each
 * line one JSON object (time, level, program, pid, request_id, msg) for log
 * collectors. The request id is per thread: the runner serves requests on
 * threads of one process. */
#include "core/log.h"
#include "core/util.h"

#include <assert.h>
#include <pthread.h>
#include <stdarg.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static _Thread_local char request_id[64];
/* Held INFO lines (ah_log_hold): written together by the next write of any
 * line, by ah_log_flush, or when full or a second old. One process's lines,
 * so no lock: only single-threaded processes (the API's workers) hold. */
static struct {
	bool on;
	size_t len;
	time_t since;
	char buf[PIPE_BUF]; /* a write to a pipe up to PIPE_BUF is never split */
} held;
static const char *program = "agenthost";
static bool json_lines;
/* getpid() is a system call on every line otherwise; 0 means "look it up".
 * Children made by fork() reset it through an atfork hook. */
static pid_t pid;

void ah_log_set_request_id(const char *id)
{
	if (!id) {
		request_id[0] = '\0';
		return;
	}
	snprintf(request_id, sizeof(request_id), "%s", id);
}

void ah_log_set_json(bool on)
{
	json_lines = on;
}

int ah_log_configure(const ah_config *cfg, ah_err *err)
{
	const char *f = ah_settings_of(cfg)->host.log_format;
	if (strcmp(f, "text") != 0 && strcmp(f, "json") != 0)
		return ah_err_set(err, AH_EINVALID, "log_format must be text or json, not \"%.40s\"", f);
	ah_log_set_json(strcmp(f, "json") == 0);
	return 0;
}

static void forget_pid(void)
{
	pid = 0;
	held.on = false; /* the parent's held lines are the parent's to write */
	held.len = 0;
}

void ah_log_set_program(const char *name)
{
	program = name;
	pid = 0;
}

static int my_pid(void)
{
	/* Caching is safe only once glibc's fork() is known to reset the cache. */
	static bool hooked;
	if (!hooked && pthread_atfork(NULL, NULL, forget_pid) != 0)
		return (int)getpid();
	hooked = true;
	if (!pid)
		pid = getpid();
	return (int)pid;
}

void ah_log_hold(bool on)
{
	if (!on)
		ah_log_flush();
	held.on = on;
}

bool ah_log_holding(void)
{
	return held.len > 0;
}

void ah_log_flush(void)
{
	size_t off = 0;
	while (off < held.len) { /* write(2) alone: a crash handler calls this */
		ssize_t w = write(STDERR_FILENO, held.buf + off, held.len - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	held.len = 0;
}

/* Writes a finished line, or holds it (INFO while holding). A line written
 * goes out with the held ones in one writev, after them. */
static void emit(bool info, const char *line, size_t len, time_t now)
{
	if (held.on && info && len <= sizeof held.buf) {
		if (held.len + len > sizeof held.buf || (held.len && now - held.since >= 1))
			ah_log_flush();
		if (!held.len)
			held.since = now;
		memcpy(held.buf + held.len, line, len);
		held.len += len;
		return;
	}
	ssize_t w;
	if (held.len && held.len + len > sizeof held.buf) /* one write stays whole on a pipe */
		ah_log_flush();
	if (!held.len) { /* never held (the runner's threads): held is only read */
		w = write(STDERR_FILENO, line, len);
	} else {
		struct iovec iov[2] = {{held.buf, held.len}, {(void *)line, len}};
		w = writev(STDERR_FILENO, iov, 2);
		held.len = 0;
	}
	(void)w;
}

/* s as the body of a JSON string into out (cap > 8): quotes, backslashes
 * and controls escaped, and every byte of s as \u00XX when s is not UTF-8
 * (the line must stay valid JSON). Cut at a whole escape when it is full. */
static size_t json_escape(char *out, size_t cap, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	bool utf8 = ah_utf8_valid(s, len);
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		bool raw = c >= 0x20 && c != '"' && c != '\\' && c != 0x7F && (c < 0x80 || utf8);
		if (o + (raw ? 1 : 6) >= cap)
			break;
		if (raw) {
			out[o++] = (char)c;
		} else if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else {
			memcpy(out + o, "\\u00", 4);
			out[o + 4] = hex[c >> 4];
			out[o + 5] = hex[c & 15];
			o += 6;
		}
	}
	return o;
}

/* The line of log_format = json. msg: the formatted message. */
static void vlog_json(const char *level, const char *stamp, const char *msg, size_t len,
                      time_t now)
{
	char line[8192];
	int n = snprintf(line, sizeof line, "{\"time\":\"%s\",\"level\":\"%s\",\"program\":\"%s\","
	                 "\"pid\":%d,\"request_id\":", stamp, level, program, my_pid());
	if (n < 0 || (size_t)n >= sizeof line)
		return;
	size_t o = (size_t)n;
	if (request_id[0]) {
		line[o++] = '"';
		o += json_escape(line + o, sizeof line - o - 16, request_id, strlen(request_id));
		line[o++] = '"';
	} else {
		memcpy(line + o, "null", 4);
		o += 4;
	}
	memcpy(line + o, ",\"msg\":\"", 8);
	o += 8;
	o += json_escape(line + o, sizeof line - o - 4, msg, len);
	memcpy(line + o, "\"}\n", 3);
	emit(strcmp(level, "INFO") == 0, line, o + 3, now);
}

static void vlog(const char *level, const char *fmt, va_list ap)
{
	char line[2048];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	if (json_lines) {
		char stamp[64], msg[2048];
		snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
		         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
		int m = vsnprintf(msg, sizeof msg, fmt, ap);
		vlog_json(level, stamp, msg, m < 0 ? 0 : (size_t)m < sizeof msg ? (size_t)m : sizeof msg - 1,
		          ts.tv_sec);
		return;
	}
	int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s[%d]%s%s ",
	                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
	                 tm.tm_sec, ts.tv_nsec / 1000000, level, program, my_pid(),
	                 request_id[0] ? " req=" : "", request_id);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	/* One line per entry: a newline inside the message would forge a line. */
	for (size_t i = (size_t)n; i < len; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	line[len++] = '\n';
	emit(strcmp(level, "INFO") == 0, line, len, ts.tv_sec);
}

#define DEFINE_LOG(name, level)                    \
	void name(const char *fmt, ...)                \
	{                                              \
		va_list ap;                                \
		va_start(ap, fmt);                         \
		vlog(level, fmt, ap);                      \
		va_end(ap);                                \
	}

DEFINE_LOG(ah_log_info, "INFO")
DEFINE_LOG(ah_log_warn, "WARN")
DEFINE_LOG(ah_log_error, "ERROR")

/* A well-formed sequence that still must not reach a log raw: a C1 control
 * (U+0080..U+009F: U+009B is a terminal's CSI), a line or paragraph separator
 * (U+2028/9) or a bidirectional control (U+200E/F, U+202A..E, U+2066..9). */
static bool hidden(const unsigned char *s, size_t n)
{
	if (n == 2)
		return s[0] == 0xC2 && s[1] < 0xA0;
	if (n != 3 || s[0] != 0xE2)
		return false;
	if (s[1] == 0x80)
		return s[2] == 0x8E || s[2] == 0x8F || (s[2] >= 0xA8 && s[2] <= 0xAE);
	return s[1] == 0x81 && s[2] >= 0xA6 && s[2] <= 0xA9;
}

static bool plain_ascii(unsigned char c)
{
	return c >= 0x20 && c != 0x7F && c != '\\';
}

size_t ah_log_escape(char *out, size_t *out_len, size_t cap, const char *in, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)in;
	size_t i = 0, o = 0;
	assert(cap >= 16); /* room for one escaped sequence of 3 bytes at least */
	while (i < len) {
		size_t bad = 0, n = ah_utf8_seq(s + i, len - i, &bad);
		bool plain = n == 1 ? plain_ascii(s[i]) : n > 1 && !hidden(s + i, n);
		size_t take = n ? n : bad;
		if (o + (plain ? take : 4 * take) >= cap)
			break;
		for (size_t k = 0; k < take; k++) {
			unsigned char c = s[i + k];
			if (plain) {
				out[o++] = (char)c;
				continue;
			}
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
		i += take;
	}
	out[o] = '\0';
	*out_len = o;
	return i;
}
