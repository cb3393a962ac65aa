/*
 * events.c - waiting on descriptors: poll, ppoll, select, pselect, epoll and eventfd
 * over pipes and eventfds, with and without timeouts, and the errors for bad
 * descriptors. Prints one line per call; the e2e tests compare ccvm's output with
 * the host's.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "report.h"

static void test_poll(int rd, int wr)
{
	struct pollfd p[3] = { { .fd = rd, .events = POLLIN }, { .fd = wr, .events = POLLOUT },
			       { .fd = -1, .events = POLLIN } };
	struct pollfd bad = { .fd = 999, .events = POLLIN };
	struct timespec ts = { .tv_nsec = 30 * 1000 * 1000 };
	sigset_t none;
	double t0 = mono();
	long r;

	r = poll(p, 1, 40);
	show("poll empty pipe, 40 ms", r);
	printf("poll waited at least 40 ms: %s\n", mono() - t0 >= 0.039 ? "yes" : "no");
	show("poll pipe writable", poll(p, 3, 0));
	printf("revents %#x %#x %#x\n", p[0].revents, p[1].revents, p[2].revents);
	if (write(wr, "x", 1) != 1)
		return;
	show("poll pipe readable", poll(p, 2, -1));
	printf("revents %#x %#x\n", p[0].revents, p[1].revents);
	show("poll a bad descriptor", poll(&bad, 1, 0));
	printf("revents %#x\n", bad.revents);
	sigemptyset(&none);
	show("ppoll readable", ppoll(p, 1, &ts, &none));
	printf("revents %#x\n", p[0].revents);
}

static void test_select(int rd, int wr)
{
	struct timeval tv = { .tv_usec = 20000 };
	struct timespec ts = { .tv_nsec = 20 * 1000 * 1000 };
	fd_set r, w;
	char c;

	if (read(rd, &c, 1) != 1)
		return;
	FD_ZERO(&r);
	FD_SET(rd, &r);
	show("select empty pipe, 20 ms", select(rd + 1, &r, NULL, NULL, &tv));
	printf("read set has the pipe: %d; timeout left %ld.%06ld\n", FD_ISSET(rd, &r),
	       (long)tv.tv_sec, (long)tv.tv_usec);
	FD_ZERO(&r);
	FD_SET(rd, &r);
	FD_ZERO(&w);
	FD_SET(wr, &w);
	show("select writable", select((rd > wr ? rd : wr) + 1, &r, &w, NULL, NULL));
	printf("read %d write %d\n", FD_ISSET(rd, &r), FD_ISSET(wr, &w));
	if (write(wr, "y", 1) != 1)
		return;
	FD_ZERO(&r);
	FD_SET(rd, &r);
	show("pselect readable", pselect(rd + 1, &r, NULL, NULL, &ts, NULL));
	printf("read %d\n", FD_ISSET(rd, &r));
	close(60); /* closed for sure, and inside the smallest descriptor table Linux keeps */
	FD_ZERO(&r);
	FD_SET(60, &r);
	show("select a bad descriptor", select(61, &r, NULL, NULL, &tv));
	if (read(rd, &c, 1) != 1)
		return;
}

static void test_epoll(int rd, int wr)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 0x1122334455667788ULL }, out[4];
	int ep = epoll_create1(EPOLL_CLOEXEC), efd = eventfd(3, EFD_NONBLOCK);
	uint64_t v = 0;
	long r;

	show("epoll_create1", ep >= 0 ? 0 : -1);
	show("epoll_create1 bad flags", epoll_create1(12345));
	show("epoll_ctl add pipe", epoll_ctl(ep, EPOLL_CTL_ADD, rd, &ev));
	show("epoll_ctl add twice", epoll_ctl(ep, EPOLL_CTL_ADD, rd, &ev));
	show("epoll_wait nothing, 20 ms", epoll_wait(ep, out, 4, 20));
	if (write(wr, "z", 1) != 1)
		return;
	r = epoll_wait(ep, out, 4, 1000);
	show("epoll_wait pipe readable", r);
	printf("events %#x data %#llx\n", r > 0 ? out[0].events : 0,
	       r > 0 ? (unsigned long long)out[0].data.u64 : 0ULL);
	ev.data.u64 = 42;
	ev.events = EPOLLIN;
	show("epoll_ctl add eventfd", epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev));
	show("epoll_ctl del pipe", epoll_ctl(ep, EPOLL_CTL_DEL, rd, NULL));
	r = epoll_pwait(ep, out, 4, 1000, NULL);
	show("epoll_pwait eventfd", r);
	printf("data %llu\n", r > 0 ? (unsigned long long)out[0].data.u64 : 0ULL);
	show("eventfd read", read(efd, &v, sizeof(v)));
	printf("eventfd value %llu\n", (unsigned long long)v);
	show("eventfd read again (nonblocking)", read(efd, &v, sizeof(v)));
	v = 5;
	show("eventfd write", write(efd, &v, sizeof(v)));
	show("epoll_wait bad maxevents", epoll_wait(ep, out, 0, 0));
	show("epoll_ctl bad descriptor", epoll_ctl(ep, EPOLL_CTL_ADD, 950, &ev));
	show("eventfd bad flags", eventfd(0, 0x7fff0000));
	close(efd);
	close(ep);
}

int main(void)
{
	int fds[2];

	if (pipe2(fds, O_CLOEXEC) < 0) {
		printf("FAIL pipe2: %s\n", strerror(errno));
		return 1;
	}
	test_poll(fds[0], fds[1]);
	test_select(fds[0], fds[1]);
	test_epoll(fds[0], fds[1]);
	return 0;
}
