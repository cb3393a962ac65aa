/*
 * hostcpu.c - the host's idle CPU time, read from /proc/stat.
 *
 * The first line of /proc/stat sums every core's time per state in clock ticks:
 * "cpu  user nice system idle iowait irq ...". Idle and iowait are time a core had
 * nothing to run, which is what a compressor could use without slowing anyone.
 * The file is opened once and read again from offset 0, which regenerates it: the
 * descriptor outlives the monitor's confinement, the path would not.
 */
#include "hostcpu.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#define HOSTCPU_LINE 256 /* the first line: ten counters of up to 20 digits */

static pthread_once_t hostcpu_once = PTHREAD_ONCE_INIT;
static int hostcpu_fd = -1;
static int hostcpu_err;

static void hostcpu_open_once(void)
{
	hostcpu_fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	hostcpu_err = hostcpu_fd < 0 ? -errno : 0;
}

int hostcpu_open(void)
{
	pthread_once(&hostcpu_once, hostcpu_open_once);
	return hostcpu_err;
}

int hostcpu_idle_ns(uint64_t *out)
{
	char line[HOSTCPU_LINE];
	unsigned long long user, nice, sys, idle, iowait;
	long hz = sysconf(_SC_CLK_TCK);
	ssize_t n;
	int rc = hostcpu_open();

	if (rc)
		return rc;
	n = pread(hostcpu_fd, line, sizeof(line) - 1, 0);
	if (n < 0)
		return -errno;
	line[n] = '\0';
	if (hz <= 0 || sscanf(line, "cpu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idle,
			      &iowait) != 5)
		return -EINVAL;
	*out = (uint64_t)((idle + iowait) * (1000000000ull / (unsigned long long)hz));
	return 0;
}
