/*
 * report.h - helpers shared by the guest test programs whose output the e2e tests
 * compare with the host's: one line per call with its result and errno's text, and a
 * monotonic clock in seconds.
 */
#ifndef CCVM_GUEST_REPORT_H
#define CCVM_GUEST_REPORT_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static inline void show(const char *what, long r)
{
	printf("%-34s %ld %s\n", what, r, r < 0 ? strerror(errno) : "");
}

static inline double mono(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

#endif
