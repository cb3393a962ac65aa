/*
 * log.h - the one logging module of ccvm.
 *
 * Every message goes to stderr prefixed with "ccvm: ", so that a guest program's own
 * output (which shares the terminal) can be told apart. The level is set once at start.
 */
#ifndef CCVM_LOG_H
#define CCVM_LOG_H

#include <stdbool.h>
#include <stddef.h>

enum log_level { LOG_ERR, LOG_WARN, LOG_INFO, LOG_DEBUG };

void log_set_level(enum log_level level);
/* The prefix of every message ("ccvm" unless set; ccvm-oci sets its own). */
void log_set_name(const char *name);
/* Every message also to @fd (-1: none), as plain lines or, @json, as runc's JSON lines
 * ({"level", "msg", "time"}). */
void log_set_sink(int fd, bool json);
enum log_level log_get_level(void);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Write a message for the caller to report into @buf (@len bytes) and return @rc: the
 * "-errno with the reason in err" convention of checks and parsers. */
int log_set_err(int rc, char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#define log_err(...)   log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
/* What the user hears at any verbosity that is not an error (an outcome they asked
 * for: a migration done): printed as errors are, without a prefix. */
#define log_always(...) log_msg(LOG_ERR, __VA_ARGS__)

#endif
