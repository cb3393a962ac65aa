/*
 * clocks.c - time through the vDSO and the clock system calls.
 * Usage: clocks [N]   (N calls of clock_gettime in a loop, default 100000)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define CHECK(cond) do { if (!(cond)) { printf("FAIL line %d: %s (errno %d %s)\n", __LINE__, #cond, errno, strerror(errno)); return 1; } } while (0)

static long long ns(const struct timespec *t)
{
	return (long long)t->tv_sec * 1000000000LL + t->tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	struct timespec t0, t1, prev, now, rt, res;
	struct timeval tv;
	long backwards = 0;

	CHECK(clock_gettime(CLOCK_MONOTONIC, &t0) == 0);
	prev = t0;
	for (long i = 0; i < n; i++) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (ns(&now) < ns(&prev))
			backwards++;
		prev = now;
	}
	printf("monotonic never went backwards: %d\n", backwards == 0);
	CHECK(clock_gettime(CLOCK_REALTIME, &rt) == 0);
	time_t t = time(NULL);
	CHECK(gettimeofday(&tv, NULL) == 0);
	printf("realtime, time() and gettimeofday agree: %d\n",
	       llabs((long long)rt.tv_sec - (long long)t) <= 1 && llabs((long long)tv.tv_sec - (long long)t) <= 1);
	printf("realtime after 2020: %d\n", rt.tv_sec > 1577836800);
	CHECK(clock_getres(CLOCK_MONOTONIC, &res) == 0);
	printf("resolution at most 1ms: %d\n", res.tv_sec == 0 && res.tv_nsec <= 1000000);

	struct timespec req = { 0, 50 * 1000 * 1000 };
	CHECK(clock_gettime(CLOCK_MONOTONIC, &t0) == 0);
	CHECK(nanosleep(&req, NULL) == 0);
	CHECK(clock_gettime(CLOCK_MONOTONIC, &t1) == 0);
	long long slept = ns(&t1) - ns(&t0);
	printf("nanosleep 50ms slept 50..1000ms: %d\n", slept >= 50000000LL && slept < 1000000000LL);
	CHECK(clock_gettime(CLOCK_MONOTONIC, &t0) == 0);
	struct timespec until = t0;
	until.tv_nsec += 20 * 1000 * 1000;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	CHECK(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == 0);
	CHECK(clock_gettime(CLOCK_MONOTONIC, &t1) == 0);
	printf("clock_nanosleep absolute reached: %d\n", ns(&t1) >= ns(&until));
	CHECK(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1) == 0);
	CHECK(clock_gettime(12345, &t1) < 0 && errno == EINVAL);
	/* Disarming an interval timer (Redis does at start), reading a disarmed one. */
	struct itimerval off = { 0 }, old, cur;
	CHECK(setitimer(ITIMER_REAL, &off, &old) == 0);
	CHECK(getitimer(ITIMER_REAL, &cur) == 0);
	printf("disarmed timer reads zero: %d\n", cur.it_value.tv_sec == 0 && cur.it_value.tv_usec == 0 &&
	       old.it_value.tv_sec == 0 && old.it_value.tv_usec == 0);
	CHECK(setitimer(7, &off, NULL) < 0 && errno == EINVAL);
	printf("clocks ok\n");
	return 0;
}
