/*
 * log.c - leveled messages on stderr.
 *
 * One write(2) per message so that lines from several threads (vCPUs, the control
 * thread) never interleave mid-line. A second sink (ccvm-oci's --log, which conmon and
 * containerd read) gets each message too, as text or as runc's JSON lines.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum log_level log_level = LOG_WARN;
static const char *log_name = "ccvm";
static int log_sink_fd = -1;
static bool log_sink_json;

void log_set_name(const char *name)
{
	log_name = name;
}

void log_set_sink(int fd, bool json)
{
	log_sink_fd = fd;
	log_sink_json = json;
}

void log_set_level(enum log_level level)
{
	log_level = level;
}

enum log_level log_get_level(void)
{
	return log_level;
}

/* @msg (@len bytes, no newline) as one line of the sink: text, or JSON with the level,
 * the message and an RFC 3339 time, the fields runc writes and its callers read. */
static void log_to_sink(enum log_level level, const char *msg, size_t len)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	char line[2300], stamp[40];
	struct timespec ts;
	struct tm tm;
	size_t n = 0;

	if (!log_sink_json) {
		n = (size_t)snprintf(line, sizeof(line), "%.*s\n", (int)len, msg);
		goto out;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	n = (size_t)snprintf(line, sizeof(line), "{\"level\":\"%s\",\"msg\":\"", names[level]);
	for (size_t i = 0; i < len && n < sizeof(line) - 64; i++) {
		unsigned char ch = (unsigned char)msg[i];

		if (ch == '"' || ch == '\\')
			n += (size_t)snprintf(line + n, sizeof(line) - n, "\\%c", ch);
		else if (ch < 0x20)
			n += (size_t)snprintf(line + n, sizeof(line) - n, "\\u%04x", ch);
		else
			line[n++] = (char)ch;
	}
	n += (size_t)snprintf(line + n, sizeof(line) - n, "\",\"time\":\"%s\"}\n", stamp);
out:
	if (n > sizeof(line) - 1)
		n = sizeof(line) - 1;
	if (write(log_sink_fd, line, n) < 0)
		return; /* the sink is gone; stderr still has it */
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *const prefix[] = { "", "warning: ", "", "debug: " };
	char buf[1024];
	va_list ap;
	int n;

	if (level > log_level)
		return;
	n = snprintf(buf, sizeof(buf), "%s: %s", log_name, prefix[level]);
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (log_sink_fd >= 0)
		log_to_sink(level, buf + strlen(log_name) + 2, (size_t)n - strlen(log_name) - 3);
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
