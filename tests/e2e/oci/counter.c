/*
 * counter.c - the e2e containers' program: counts, one line every PERIOD ms (default
 * 100), "count N MS" with N from 0 and MS the monotonic clock in milliseconds, flushed
 * each time, so that a log shows whether it ran on, stalled, or went back. With MB, it
 * first fills that many MiB with bytes that do not compress, so that a snapshot of it
 * takes a while to write.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The memory stays in use: its last word is printed, so no compiler drops the fill. */
static void fill(long mb)
{
	size_t n = ((size_t)mb << 20) / sizeof(uint64_t);
	uint64_t x = 88172645463325252ull, *p = malloc(n * sizeof(*p));

	for (size_t i = 0; p && i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift: no codec shrinks it */
		p[i] = x;
	}
	printf("filled %ld MiB %llx\n", mb, p && n ? (unsigned long long)p[n - 1] : 0ull);
}

int main(int argc, char **argv)
{
	long period_ms = argc > 1 ? atol(argv[1]) : 100;
	struct timespec pause = { .tv_sec = period_ms / 1000, .tv_nsec = period_ms % 1000 * 1000000 };

	if (argc > 2)
		fill(atol(argv[2]));
	for (long n = 0;; n++) {
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		printf("count %ld %lld\n", n, (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
		fflush(stdout);
		nanosleep(&pause, NULL);
	}
}
