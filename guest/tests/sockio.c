/*
 * sockio.c - a non-blocking epoll server and its clients in one process, written to
 * drive every branch of ccvm's exitless socket path (vmm/linux/fastio.c) and to print
 * the same lines natively and in ccvm:
 *   echo  2000 pipelined messages read back in chunks of 7, 64 and 1 bytes (so a read
 *         leaves bytes in the read-ahead slot and epoll must still report the socket),
 *         echoed with write, writev and send, some larger than a ring record;
 *   bulk  8 MiB written to a client that does not read for 300 ms (the socket's
 *         backlog, a blocking writer waiting for room), then closed at once (the
 *         backlog must still arrive whole);
 *   close a non-blocking server writes until the socket refuses more, several times
 *         in a row, then closes while its client waits for that close (a flag, not a
 *         guess of time: on a slow machine a sleep ended first): every byte it was
 *         told was written arrives;
 *   peek  poll, recv(MSG_PEEK), readv and recvfrom on bytes already read ahead.
 * On stderr it says how many of its calls needed no exit (ccvm's area, when present).
 * Usage: sockio PORT
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define ECHO_MSGS	 2000
#define BULK_BYTES	 (8 << 20)
#define BIG_ECHO	 (100 << 10) /* above the exitless path's record size */
#define CCVM_FASTIO_AUXV 0x63637601

static int port;
static size_t close_written; /* by the server in the close test */
static int close_done;       /* the server closed the close test's socket */

struct conn {
	char mode;
	unsigned reads;
};
static struct conn conns[1024];

static struct sockaddr_in loopback(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static int dial(void)
{
	struct sockaddr_in a = loopback();
	int s = socket(AF_INET, SOCK_STREAM, 0);

	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		exit(1);
	}
	return s;
}

static void send_all(int s, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(s, p, n);

		if (w <= 0) {
			perror("client write");
			exit(1);
		}
		p += w;
		n -= (size_t)w;
	}
}

/* Everything until EOF, into a growing buffer. */
static uint8_t *read_all(int s, size_t *n)
{
	size_t cap = 1 << 16;
	uint8_t *b = malloc(cap);
	ssize_t r;

	*n = 0;
	while ((r = read(s, b + *n, cap - *n)) > 0) {
		*n += (size_t)r;
		if (*n == cap)
			b = realloc(b, cap *= 2);
	}
	if (r < 0)
		perror("client read");
	return b;
}

static uint32_t rnd(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

static void *client_echo(void)
{
	size_t cap = 1 + ECHO_MSGS * 300 + 2 * BIG_ECHO, n = 1, got;
	uint8_t *out = malloc(cap), *in;
	uint32_t seed = 42;
	int s = dial();

	out[0] = 'E';
	for (int i = 0; i < ECHO_MSGS; i++) {
		size_t len = i == 500 || i == 1500 ? BIG_ECHO : 1 + rnd(&seed) % 300;

		for (size_t k = 0; k < len; k++)
			out[n + k] = (uint8_t)rnd(&seed);
		n += len;
	}
	send_all(s, out, n);
	shutdown(s, SHUT_WR);
	in = read_all(s, &got);
	printf("echo: %d messages, %zu bytes sent, %zu back, %s\n", ECHO_MSGS, n - 1, got,
	       got == n - 1 && memcmp(in, out + 1, got) == 0 ? "identical" : "DIFFERENT");
	close(s);
	free(in);
	free(out);
	return NULL;
}

static uint8_t bulk_byte(size_t i)
{
	return (uint8_t)(i * 7 + i / 4096);
}

/* Ask for test @mode, sleep while the server writes, then read it all: how many bytes
 * came back, and how many of them differ from the pattern. */
static size_t client_slow_reader(char mode, size_t *bad)
{
	int s = dial();
	size_t got;
	uint8_t *in;

	send_all(s, (const uint8_t *)&mode, 1);
	if (mode == 'C')
		while (!__atomic_load_n(&close_done, __ATOMIC_ACQUIRE))
			usleep(1000);
	else
		usleep(300000);
	in = read_all(s, &got);
	*bad = 0;
	for (size_t i = 0; i < got; i++)
		*bad += in[i] != bulk_byte(i);
	close(s);
	free(in);
	return got;
}

static void client_bulk(void)
{
	size_t bad, got = client_slow_reader('B', &bad);

	printf("bulk: %zu bytes back of %d, %zu wrong\n", got, BULK_BYTES, bad);
}

static void client_close(void)
{
	size_t bad, got = client_slow_reader('C', &bad);

	printf("close: every byte written before close arrived: %s, %zu wrong\n",
	       got == __atomic_load_n(&close_written, __ATOMIC_ACQUIRE) ? "yes" : "NO", bad);
}

static void client_peek(void)
{
	int s = dial();
	char b[8] = {0};

	send_all(s, (const uint8_t *)"Phello world", 12);
	printf("peek: reply %zd '%s'\n", read(s, b, 2), b);
	close(s);
}

static void *client(void *arg)
{
	(void)arg;
	client_echo();
	client_bulk();
	client_close();
	client_peek();
	return NULL;
}

/* ---- the server ---- */

static void echo_back(int fd, struct conn *c, const uint8_t *b, size_t n)
{
	unsigned k = c->reads % 3;
	ssize_t w;

	/* A non-blocking socket may refuse part: wait for room as a server would. */
	while (n) {
		if (k == 0 || n < 2) {
			w = write(fd, b, n);
		} else if (k == 1) {
			struct iovec v[2] = {{(void *)b, n / 2}, {(void *)(b + n / 2), n - n / 2}};

			w = writev(fd, v, 2);
		} else {
			w = send(fd, b, n, MSG_NOSIGNAL);
		}
		if (w < 0 && errno == EAGAIN) {
			poll(&(struct pollfd){.fd = fd, .events = POLLOUT}, 1, 1000);
			continue;
		}
		if (w < 0) {
			perror("server write");
			exit(1);
		}
		b += w;
		n -= (size_t)w;
	}
}

static void serve_bulk(int fd)
{
	uint8_t *b = malloc(BULK_BYTES);
	size_t done = 0;
	uint32_t seed = 7;

	for (size_t i = 0; i < BULK_BYTES; i++)
		b[i] = bulk_byte(i);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	while (done < BULK_BYTES) {
		size_t n = 100 + rnd(&seed) % (96 << 10);
		ssize_t w;

		if (n > BULK_BYTES - done)
			n = BULK_BYTES - done;
		w = write(fd, b + done, n);
		if (w <= 0) {
			perror("bulk write");
			exit(1);
		}
		done += (size_t)w;
	}
	free(b);
}

/* Writes until CLOSE_REFUSALS in a row are refused, not one: under ccvm a refused
 * write is a system call on a socket that was full, and the next one may go to the
 * ring again and be taken; only when a ring record met the full socket (a backlog)
 * or the ring filled are writes refused in a row. On a slow machine the socket's last
 * free byte sometimes went to the call's own write, and the backlog and the close
 * with bytes owed, which this test is for, did not happen. Natively the refusals come
 * at once: the client reads nothing until the close. */
#define CLOSE_REFUSALS 4

static void serve_close(int fd)
{
	static uint8_t b[64 << 10];
	size_t done = 0;
	int refused = 0;
	ssize_t w;

	do {
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] = bulk_byte(done + i);
		w = write(fd, b, sizeof(b));
		if (w > 0)
			done += (size_t)w, refused = 0;
		else if (w < 0 && errno == EAGAIN)
			refused++;
	} while ((w > 0 || (w < 0 && errno == EAGAIN && refused < CLOSE_REFUSALS)) &&
		 done < 4 * BULK_BYTES);
	__atomic_store_n(&close_written, done, __ATOMIC_RELEASE);
}

static void serve_peek(int fd)
{
	char p[8] = {0}, a[4] = {0}, r[16] = {0};
	struct iovec v[2] = {{a, 3}, {r, 3}};
	struct pollfd pf = {.fd = fd, .events = POLLIN};
	struct sockaddr_in from;
	socklen_t flen = sizeof(from);

	int n = poll(&pf, 1, 2000);

	printf("peek: poll %d revents %#x\n", n, pf.revents);
	printf("peek: recv MSG_PEEK %zd '%s'\n", recv(fd, p, 5, MSG_PEEK), p);
	printf("peek: readv %zd '%s' '%s'\n", readv(fd, v, 2), a, r);
	memset(r, 0, sizeof(r));
	printf("peek: recvfrom %zd '%s'\n",
	       recvfrom(fd, r, sizeof(r) - 1, 0, (struct sockaddr *)&from, &flen), r);
	echo_back(fd, &conns[fd], (const uint8_t *)"ok", 2);
}

/* One readable connection: returns 1 when it is finished. */
static int serve(int ep, int fd)
{
	static const size_t chunks[] = {7, 64, 1, BIG_ECHO};
	struct conn *c = &conns[fd];
	uint8_t b[BIG_ECHO];
	ssize_t r = read(fd, b, c->mode ? chunks[c->reads % 4] : 1);

	if (r < 0 && errno == EAGAIN)
		return 0;
	if (r <= 0 || c->mode == 'P') {
		epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
		close(fd);
		return 1;
	}
	c->reads++;
	if (!c->mode) {
		c->mode = (char)b[0];
		if (c->mode == 'B')
			serve_bulk(fd);
		else if (c->mode == 'C')
			serve_close(fd);
		else if (c->mode == 'P')
			serve_peek(fd);
		if (c->mode == 'B' || c->mode == 'C') {
			epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
			close(fd); /* with most of the 8 MiB still on its way */
			if (c->mode == 'C')
				__atomic_store_n(&close_done, 1, __ATOMIC_RELEASE);
			return 1;
		}
		return 0;
	}
	echo_back(fd, c, b, (size_t)r);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a;
	struct epoll_event ev = {.events = EPOLLIN}, evs[16];
	int ls, ep, done = 0, one = 1;
	pthread_t th;
	const uint64_t *area;

	if (argc != 2)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	port = atoi(argv[1]);
	a = loopback();
	ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 16) < 0) {
		perror("listen");
		return 1;
	}
	ep = epoll_create1(0);
	ev.data.fd = ls;
	epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
	pthread_create(&th, NULL, client, NULL);
	while (done < 4) {
		int n = epoll_wait(ep, evs, 16, 10000);

		if (n <= 0) {
			printf("server: epoll_wait %d: stuck\n", n);
			return 1;
		}
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd == ls) {
				int c = accept4(ls, NULL, NULL, SOCK_NONBLOCK);

				if (c < 0 || c >= 1024)
					continue;
				conns[c] = (struct conn){0};
				ev.data.fd = c;
				epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
			} else {
				done += serve(ep, fd);
			}
		}
	}
	pthread_join(th, NULL);
	/* The exitless path's counters (fastio_abi.h: after magic, flags, head, tail). */
	area = (const uint64_t *)getauxval(CCVM_FASTIO_AUXV);
	if (area)
		fprintf(stderr, "fastio: %llu reads and %llu writes without an exit\n",
			(unsigned long long)area[4], (unsigned long long)area[5]);
	return 0;
}
