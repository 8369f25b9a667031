/* Log lines to stderr: time, level, pid, the current request id, message.
 * Never pass a secret value to these. */
#ifndef AH_CORE_LOG_H
#define AH_CORE_LOG_H

/* The request id stamped on every line until cleared (NULL). Copied. */
void ah_log_set_request_id(const char *id);
void ah_log_set_program(const char *name);

void ah_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ah_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ah_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
