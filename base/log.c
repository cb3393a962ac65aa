/*
 * log.c - leveled messages on stderr.
 *
 * One write(2) per message so that lines from several threads (vCPUs, the control
 * thread) never interleave mid-line.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static enum log_level log_level = LOG_WARN;

void log_set_level(enum log_level level)
{
	log_level = level;
}

enum log_level log_get_level(void)
{
	return log_level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *const prefix[] = { "", "warning: ", "", "debug: " };
	char buf[1024];
	va_list ap;
	int n;

	if (level > log_level)
		return;
	n = snprintf(buf, sizeof(buf), "ccvm: %s", prefix[level]);
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, (size_t)n) < 0)
		return; /* nowhere left to report it */
}

int log_set_err(int rc, char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return rc;
}
