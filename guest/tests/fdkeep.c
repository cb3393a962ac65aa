/*
 * fdkeep.c - descriptors that must survive a snapshot and restore: a pipe holding 4
 * bytes, an eventfd with a count, an epoll instance watching both with its own event data, a
 * non-blocking socket pair. It sets them up, prints "ready", waits until stdin
 * closes (the e2e test snapshots it then, and closes stdin once the snapshot is done,
 * on a machine of any speed), and prints what each one does afterwards. Run to the
 * end or restored, the output is the same except for the socket pair: a connection
 * does not survive a restore, so its read sees the peer gone (0) instead of EAGAIN.
 * Usage: fdkeep
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "report.h"

#define PIPE_DATA    0x1111
#define EVENTFD_DATA 0x2222

static void show_events(int ep, const char *what)
{
	struct epoll_event ev[4];
	int n = epoll_wait(ep, ev, 4, 0);

	/* In data order: which became ready first is not part of what a restore keeps. */
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && ev[j].data.u64 < ev[j - 1].data.u64; j--) {
			struct epoll_event t = ev[j];

			ev[j] = ev[j - 1];
			ev[j - 1] = t;
		}
	printf("%-34s %d", what, n);
	for (int i = 0; i < n; i++)
		printf(" data=%#llx", (unsigned long long)ev[i].data.u64);
	printf("\n");
}

int main(void)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int p[2], sp[2], e, ep;
	uint64_t count = 0;
	char buf[16] = { 0 }, in[64];
	long r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pipe2(p, O_CLOEXEC) || (e = eventfd(3, EFD_CLOEXEC)) < 0 ||
	    (ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp)) {
		printf("FAIL setup: %s\n", strerror(errno));
		return 1;
	}
	ev.data.u64 = PIPE_DATA;
	epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);
	ev.data.u64 = EVENTFD_DATA;
	epoll_ctl(ep, EPOLL_CTL_ADD, e, &ev);
	show("pipe write before", write(p[1], "kept", 4));
	printf("ready\n");
	while (read(0, in, sizeof(in)) > 0)
		;
	show_events(ep, "epoll (eventfd and pipe ready)");
	r = read(e, &count, sizeof(count));
	printf("%-34s %ld count=%llu\n", "eventfd read", r, (unsigned long long)count);
	show("pipe write", write(p[1], "hi", 2));
	show_events(ep, "epoll (pipe ready)");
	r = read(p[0], buf, sizeof(buf) - 1);
	printf("%-34s %ld '%s'\n", "pipe read", r, buf);
	printf("%-34s %d\n", "socket still non-blocking", (fcntl(sp[0], F_GETFL) & O_NONBLOCK) != 0);
	show("socket pair read", read(sp[0], buf, sizeof(buf)));
	return 0;
}
