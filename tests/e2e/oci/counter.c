/*
 * counter.c - the e2e containers' program: counts, one line every PERIOD ms (default
 * 100), "count N MS" with N from 0 and MS the monotonic clock in milliseconds, flushed
 * each time, so that a log shows whether it ran on, stalled, or went back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	long period_ms = argc > 1 ? atol(argv[1]) : 100;
	struct timespec pause = { .tv_sec = period_ms / 1000, .tv_nsec = period_ms % 1000 * 1000000 };

	for (long n = 0;; n++) {
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		printf("count %ld %lld\n", n, (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
		fflush(stdout);
		nanosleep(&pause, NULL);
	}
}
