/* The state of one exec's pipes and what is done with their data
 * (exec_io.c), shared by exec.c. Private to the sandbox library. */
#ifndef AH_SANDBOX_EXEC_IO_H
#define AH_SANDBOX_EXEC_IO_H

#include <stdbool.h>
#include <stddef.h>

#define TAIL_MAX 4096
#define LOG_MAX (64 * 1024)   /* escaped stderr logged per exec; the rest only in the tail */
#define LOG_TEXT_MAX 1536     /* escaped text per log line: with the tag, one log entry */
#define KILL_GRACE_MS 5000    /* after KILL, the spawner must answer within this */

typedef struct io {
	const char *in; size_t in_len, in_off;
	bool in_is_file; int in_file;  /* stdin from in_file (spliced), not in */
	char *out; size_t out_len, out_cap, max_out; bool truncated;
	char tail[TAIL_MAX]; size_t tail_len;
	char line[1024]; size_t line_len; size_t logged; bool log_cut;
	const char *tag;
	int fd_in, fd_out, fd_err;
	int out_file;                /* >= 0: stdout goes there, not into out */
	void (*on_output)(void *ctx, const char *data, size_t len); /* spec's, or NULL */
	void *output_ctx;
	void (*on_stdout)(void *ctx, const char *data, size_t len); /* spec's, or NULL */
	void *stdout_ctx;
	const volatile int *cancel;  /* spec's, or NULL */
	bool cancelled;              /* SIGTERM went to the program for it */
	struct ah_redact *rd;        /* stderr passes it first (secrets out, kept window), or NULL */
} io;

/* One stderr line into the log under the tag (see exec_io.c). */
void sb_io_log_line(io *s);
void sb_io_on_stderr(io *s, const char *b, size_t n);
/* false when the cap is exceeded (or the output file failed). */
bool sb_io_on_stdout(io *s, const char *b, size_t n);
void sb_io_close_fd(int *fd);
/* Writes what the pipe takes; closes it when all is written or the program
 * closed its end. */
void sb_io_feed_stdin(io *s);
/* One read of *fd (stdout when is_out); *kill_now when over the cap. */
void sb_io_drain(io *s, int *fd, bool is_out, bool *kill_now);

#endif
