/*
 * net.c - sockets over loopback and AF_UNIX: a TCP server and client in one process
 * (bind, listen, non-blocking connect, accept4, send/recv, sendmsg/recvmsg with two
 * buffers, epoll on a socket, socket options, shutdown), UDP to itself, AF_UNIX stream
 * and socketpair. Prints one line per call; the e2e tests compare ccvm's output
 * (with the port published) with the host's.
 * Usage: net PORT          the tests above, the server on 127.0.0.1:PORT
 *        net echo PORT     accept one connection on PORT, echo one line back, exit
 *        net connect IP PORT   one TCP connection attempt, its result printed
 *        net unix-listen PATH  listen on an AF_UNIX path for 5 seconds
 *        net unix-connect PATH one AF_UNIX connection attempt, its result printed
 *        net unix-say PATH LINE  the same, then LINE sent and any reply printed
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "report.h"

static struct sockaddr_in loopback(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static int listener(int port)
{
	struct sockaddr_in a = loopback(port), got;
	socklen_t len = sizeof(got);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, v = 0;
	socklen_t vlen = sizeof(v);

	show("setsockopt SO_REUSEADDR", setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)));
	show("getsockopt SO_REUSEADDR", getsockopt(s, SOL_SOCKET, SO_REUSEADDR, &v, &vlen));
	printf("value %d length %u\n", v != 0, vlen);
	show("bind 127.0.0.1:PORT", bind(s, (struct sockaddr *)&a, sizeof(a)));
	if (listen(s, 8) < 0) {
		show("listen", -1);
		close(s);
		return -1;
	}
	show("listen", 0);
	show("getsockname", getsockname(s, (struct sockaddr *)&got, &len));
	printf("listening on the port asked for: %s\n", ntohs(got.sin_port) == port ? "yes" : "no");
	return s;
}

static void test_tcp(int port)
{
	struct sockaddr_in a = loopback(port), peer;
	socklen_t len = sizeof(peer);
	int s = listener(port), cl, srv, ep, err = 0, one = 1;
	socklen_t elen = sizeof(err);
	struct pollfd p;
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 77 }, out;
	char buf[16] = { 0 }, b1[3], b2[4];
	struct iovec iov[2] = { { (void *)"abc", 3 }, { (void *)"defg", 4 } };
	struct iovec rio[2] = { { b1, sizeof(b1) }, { b2, sizeof(b2) } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 }, rm = { .msg_iov = rio, .msg_iovlen = 2 };
	long r;

	if (s < 0)
		return;
	cl = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	r = connect(cl, (struct sockaddr *)&a, sizeof(a));
	show("non-blocking connect", r == 0 || errno == EINPROGRESS ? 0 : r);
	p = (struct pollfd){ .fd = cl, .events = POLLOUT };
	show("poll connecting socket", poll(&p, 1, 5000));
	show("getsockopt SO_ERROR", getsockopt(cl, SOL_SOCKET, SO_ERROR, &err, &elen));
	printf("connect error %d\n", err);
	srv = accept4(s, (struct sockaddr *)&peer, &len, SOCK_CLOEXEC);
	show("accept4", srv >= 0 ? 0 : -1);
	printf("peer family %d length %u\n", peer.sin_family, len);
	len = sizeof(peer);
	show("getpeername of the client", getpeername(cl, (struct sockaddr *)&peer, &len));
	printf("client connected to the port asked for: %s\n", ntohs(peer.sin_port) == port ? "yes" : "no");
	show("setsockopt TCP_NODELAY", setsockopt(cl, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)));
	ep = epoll_create1(0);
	show("epoll_ctl add the server side", epoll_ctl(ep, EPOLL_CTL_ADD, srv, &ev));
	show("send", send(cl, "hello", 5, 0));
	show("epoll_wait", epoll_wait(ep, &out, 1, 5000));
	printf("events %#x data %u\n", out.events, out.data.u32);
	show("recv", recv(srv, buf, sizeof(buf) - 1, 0));
	printf("got '%s'\n", buf);
	show("sendmsg two buffers", sendmsg(srv, &m, 0));
	p = (struct pollfd){ .fd = cl, .events = POLLIN };
	poll(&p, 1, 5000);
	show("recvmsg two buffers", recvmsg(cl, &rm, 0));
	printf("got '%.3s' '%.4s'\n", b1, b2);
	show("shutdown the client's writing", shutdown(cl, SHUT_WR));
	show("recv at end of stream", recv(srv, buf, sizeof(buf), 0));
	close(ep);
	close(srv);
	close(cl);
	close(s);
}

static void test_udp(void)
{
	struct sockaddr_in a = loopback(0), from;
	socklen_t len = sizeof(a), flen = sizeof(from);
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	char buf[16] = { 0 };

	show("udp bind an ephemeral port", bind(u, (struct sockaddr *)&a, sizeof(a)));
	getsockname(u, (struct sockaddr *)&a, &len);
	show("udp sendto itself", sendto(u, "ping", 4, 0, (struct sockaddr *)&a, sizeof(a)));
	show("udp recvfrom", recvfrom(u, buf, sizeof(buf) - 1, 0, (struct sockaddr *)&from, &flen));
	printf("got '%s' from itself: %s\n", buf, from.sin_port == a.sin_port ? "yes" : "no");
	close(u);
}

static void test_unix(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX, .sun_path = "unix.sock" };
	int s = socket(AF_UNIX, SOCK_STREAM, 0), cl = socket(AF_UNIX, SOCK_STREAM, 0), srv, sp[2];
	char buf[8] = { 0 };

	unlink("unix.sock");
	show("unix bind", bind(s, (struct sockaddr *)&a, sizeof(a)));
	show("unix listen", listen(s, 1));
	show("unix connect", connect(cl, (struct sockaddr *)&a, sizeof(a)));
	srv = accept(s, NULL, NULL);
	show("unix accept", srv >= 0 ? 0 : -1);
	show("unix write", write(cl, "unix", 4));
	show("unix read", read(srv, buf, sizeof(buf) - 1));
	printf("got '%s'\n", buf);
	show("socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, sp));
	show("socketpair write", write(sp[0], "pair", 4));
	memset(buf, 0, sizeof(buf));
	show("socketpair read", read(sp[1], buf, sizeof(buf) - 1));
	printf("got '%s'\n", buf);
	show("unix connect to a missing path",
	     connect(socket(AF_UNIX, SOCK_STREAM, 0),
		     (struct sockaddr *)&(struct sockaddr_un){ .sun_family = AF_UNIX,
							     .sun_path = "missing.sock" },
		     sizeof(a)));
	unlink("unix.sock");
}

/* Accept one connection and echo one line back: for a client outside the VM. */
static int echo_once(int port)
{
	int s = listener(port), c;
	char buf[256];
	ssize_t n;

	if (s < 0)
		return 1;
	fflush(stdout);
	c = accept(s, NULL, NULL);
	if (c < 0)
		return 1;
	n = read(c, buf, sizeof(buf));
	if (n > 0 && write(c, buf, (size_t)n) != n)
		return 1;
	close(c);
	return 0;
}

static int connect_once(const char *ip, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int s = socket(AF_INET, SOCK_STREAM, 0);

	if (inet_pton(AF_INET, ip, &a.sin_addr) != 1)
		return 2;
	show("connect", connect(s, (struct sockaddr *)&a, sizeof(a)));
	return 0;
}

static int unix_mode(bool listen_mode, const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (!listen_mode) {
		show("unix connect", connect(s, (struct sockaddr *)&a, sizeof(a)));
		return 0;
	}
	unlink(path);
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 1) < 0)
		return 1;
	sleep(5);
	unlink(path);
	return 0;
}

/* Connect to the Unix socket @path and say @line: what a guest would send another
 * VM's control socket. Prints the connect's result and any reply. */
static int unix_say(const char *path, const char *line)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	char reply[512] = { 0 };
	ssize_t n;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	show("unix connect", connect(s, (struct sockaddr *)&a, sizeof(a)));
	if (dprintf(s, "%s\n", line) < 0)
		return 0;
	n = read(s, reply, sizeof(reply) - 1);
	printf("reply %zd: %s\n", n, n > 0 ? reply : "");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "unix-say") == 0)
		return unix_say(argv[2], argv[3]);
	if (argc == 3 && strncmp(argv[1], "unix-", 5) == 0)
		return unix_mode(strcmp(argv[1], "unix-listen") == 0, argv[2]);
	if (argc == 3 && strcmp(argv[1], "echo") == 0)
		return echo_once(atoi(argv[2]));
	if (argc == 4 && strcmp(argv[1], "connect") == 0)
		return connect_once(argv[2], atoi(argv[3]));
	if (argc != 2) {
		fprintf(stderr, "usage: net PORT | net echo PORT | net connect IP PORT | "
				"net unix-listen|unix-connect PATH | net unix-say PATH LINE\n");
		return 2;
	}
	test_tcp(atoi(argv[1]));
	test_udp();
	test_unix();
	return 0;
}
