/*
 * mono.h - the host's monotonic clock, the one every part of the monitor times with
 * (pauses, windows, timeouts, rates). Not the guest's clocks: those are
 * vmm/linux/clock.c's.
 */
#ifndef CCVM_MONO_H
#define CCVM_MONO_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC now, in nanoseconds. */
static inline uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Clock @id now, in nanoseconds; 0 when it cannot be read (another thread's CPU clock
 * once that thread has ended). */
static inline uint64_t mono_clock_ns(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The CPU time the calling thread has run, in nanoseconds: what a piece of work took
 * on a core, without the time it waited for one. */
static inline uint64_t mono_thread_cpu_ns(void)
{
	return mono_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* The same in seconds. */
static inline double mono_s(void)
{
	return (double)mono_ns() / 1e9;
}

#endif
