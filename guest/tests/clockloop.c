/*
 * clockloop.c - N clock_gettime calls, then wait until stdin closes, so that the VM's
 * exit counters can be read over the control socket while it waits.
 * Usage: clockloop N
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	struct timespec ts;
	long long acc = 0;
	char buf[64];

	for (long i = 0; i < n; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		acc += ts.tv_nsec & 1;
	}
	printf("done %ld calls (%lld)\n", n, acc >= 0 ? 0LL : 1LL);
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	return 0;
}
