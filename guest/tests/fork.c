/*
 * fork.c - fork as a program sees it: the child starts with a copy of its parent's
 * memory and from then on neither sees the other's writes; wait4 returns its status;
 * pipes, socketpairs and eventfds connect the two. Every line it prints is independent
 * of scheduling, so the e2e tests compare ccvm's output with the host's line by line.
 *
 * Modes:
 *   fork [MiB]          the checks above over MiB of memory (default 64), with rounds
 *                       in which parent and child write every 2 MiB block in turn
 *                       (many more page-table changes than a pool holds)
 *   fork time MiB [wait]  fill MiB, fork, and print how long the parent's fork took
 *                       (microseconds) and how long the child took to write 1 byte
 *                       in each of 16 blocks; the child exits 0. With "wait": a line
 *                       read from stdin after the fill and another before the child
 *                       exits, so that a test can look at the memory in between
 *   fork bomb [SECONDS] fork children that sleep until fork fails; print the error
 *                       and how many there were, wait SECONDS (default 0), then end
 *                       them all
 *   fork budget N MiB   fork N children that each map MiB and write every page of it,
 *                       all alive at once (ccvm's --mem-total, issue 54). A child
 *                       that gets SIGBUS (BUS_ADRERR inside its mapping) says so from
 *                       its handler. Prints how many wrote it all, got SIGBUS, or could
 *                       not be forked (and why), then "holding", reads a line from
 *                       stdin, and ends them all
 *   fork hold N MiB     fork N children that each fill MiB of their own with a pattern
 *                       of their own, print "holding", read stdin until a line or its
 *                       end (a snapshot or a migration happens meanwhile), then have
 *                       each child check every byte, and the 3 MiB of shared memory the
 *                       parent filled before the forks, and print how many kept all
 *                       of it: a tree's memory as a snapshot or migration moves it
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB        (1UL << 20)
#define BLOCK      (2 * MIB)
#define ROUNDS     6    /* of fork and writes: ~4 times the changes a pool half holds */
#define BOMB_MAX   4096 /* children a fork bomb keeps count of */
#define TIME_TOUCH 16   /* blocks the timed child writes */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static unsigned char *fill(size_t len, unsigned char v)
{
	unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	memset(m, v, len);
	return m;
}

/* Every byte of [m, m + len) is @v: the offset of the first that is not, or -1. */
static long differs(const unsigned char *m, size_t len, unsigned char v)
{
	for (size_t i = 0; i < len; i++)
		if (m[i] != v)
			return (long)i;
	return -1;
}

static int wait_status(pid_t pid)
{
	int st = 0;

	if (waitpid(pid, &st, 0) != pid) {
		perror("waitpid");
		exit(1);
	}
	return st;
}

/* Rounds of: fork, then parent and child each write every block with their own value
 * and check that they see only their own, the child first that it saw the parent's
 * value from before the fork. Each round shares every block again, so every write
 * changes page tables on both sides: many more changes than a pool half holds, so
 * stale translations of reused table pages would show the other side's bytes. */
static void rounds(unsigned char *m, size_t len)
{
	int bad = 0, r;

	memset(m, 0x20, len);
	for (r = 0; r < ROUNDS && !bad; r++) {
		pid_t pid = fork();

		if (pid == 0) {
			if (differs(m, len, 0x20 + r) >= 0)
				_exit(12);
			for (size_t b = 0; b < len; b += BLOCK)
				memset(m + b, 0x40 + r, BLOCK);
			_exit(differs(m, len, 0x40 + r) >= 0 ? 13 : 0);
		}
		for (size_t b = 0; b < len; b += BLOCK)
			memset(m + b, 0x21 + r, BLOCK);
		bad = WEXITSTATUS(wait_status(pid));
		if (differs(m, len, 0x21 + r) >= 0)
			bad = 1;
		memset(m, 0x21 + r, len); /* what the next child starts with */
	}
	printf("%d rounds of fork and whole-memory writes on both sides: %s\n", ROUNDS,
	       bad ? "the copies mixed" : "apart");
}

/* A descriptor over socket @s (SCM_RIGHTS). */
static int send_fd(int s, int fd)
{
	char byte = 'F', ctl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { &byte, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			    .msg_controllen = sizeof(ctl) };
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);

	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof(int));
	return sendmsg(s, &m, 0) == 1 ? 0 : -1;
}

static int recv_fd(int s)
{
	char byte, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			    .msg_controllen = sizeof(ctl) };
	struct cmsghdr *h;
	int fd = -1;

	if (recvmsg(s, &m, 0) != 1 || !(h = CMSG_FIRSTHDR(&m)) || h->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(h), sizeof(int));
	return fd;
}

/* Bytes through a pipe, a socketpair and an eventfd made before the fork, and a pipe
 * the child made, passed to the parent over the socketpair. */
static void channels(void)
{
	int p[2], sv[2], efd = eventfd(0, 0);
	char buf[32] = "";
	uint64_t ev = 0;
	pid_t pid;

	if (pipe(p) || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || efd < 0) {
		perror("channels");
		exit(1);
	}
	pid = fork();
	if (pid == 0) {
		uint64_t one = 5;

		close(p[0]);
		if (write(p[1], "through a pipe", 15) != 15 || write(sv[1], "and a socket", 13) != 13 ||
		    write(efd, &one, sizeof(one)) != sizeof(one))
			_exit(1);
		if (read(sv[1], buf, sizeof(buf)) <= 0)
			_exit(2);
		if (strcmp(buf, "back"))
			_exit(3);
		int q[2];

		if (pipe(q) || send_fd(sv[1], q[0]) || write(q[1], "via a passed fd", 16) != 16)
			_exit(4);
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], buf, sizeof(buf)) == 15)
		printf("parent read '%s'\n", buf);
	if (read(sv[0], buf, sizeof(buf)) == 13)
		printf("parent read '%s'\n", buf);
	if (write(sv[0], "back", 5) != 5)
		perror("write");
	if (read(efd, &ev, sizeof(ev)) == sizeof(ev))
		printf("eventfd counted %llu\n", (unsigned long long)ev);
	int got = recv_fd(sv[0]);

	if (got >= 0 && read(got, buf, sizeof(buf)) == 16)
		printf("parent read '%s'\n", buf);
	else
		printf("no descriptor passed (%d)\n", got);
	printf("channels child status %d\n", WEXITSTATUS(wait_status(pid)));
}

static int basic(size_t mib)
{
	size_t len = mib * MIB;
	unsigned char *m = fill(len, 0xA5);
	int st;
	pid_t pid = fork();

	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		/* The parent's memory as it was, then the child's own writes. */
		if (differs(m, len, 0xA5) >= 0)
			_exit(20);
		memset(m, 0x5A, len / 2);
		if (differs(m, len / 2, 0x5A) >= 0 || differs(m + len / 2, len - len / 2, 0xA5) >= 0)
			_exit(21);
		_exit(7);
	}
	memset(m + len / 2, 0x11, len - len / 2);
	st = wait_status(pid);
	printf("child exited %d (signalled %d)\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
	       WIFSIGNALED(st));
	printf("parent's first half untouched by the child: %s\n",
	       differs(m, len / 2, 0xA5) < 0 ? "yes" : "no");
	printf("parent's second half its own: %s\n",
	       differs(m + len / 2, len - len / 2, 0x11) < 0 ? "yes" : "no");
	rounds(m, len);
	channels();
	pid = fork();
	if (pid == 0)
		raise(SIGKILL);
	st = wait_status(pid);
	printf("a child that kills itself: signalled %d, signal %d\n", WIFSIGNALED(st),
	       WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	pid = fork();
	if (pid == 0) {
		struct rlimit none = { 0, 0 };

		setrlimit(RLIMIT_CORE, &none); /* natively too: no core, no WCOREDUMP */
		*(volatile int *)(uintptr_t)16 = 1; /* a crash: SIGSEGV, no handler */
		_exit(0);
	}
	st = wait_status(pid);
	printf("a child that crashes: signalled %d, signal %d; the parent goes on\n",
	       WIFSIGNALED(st), WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	return 0;
}

/* A line from stdin, when @wait (a test's go-ahead). */
static void go_ahead(int wait)
{
	char line[16];

	if (wait && !fgets(line, sizeof(line), stdin))
		exit(1);
}

static int timed(size_t mib, int wait)
{
	size_t len = mib * MIB;
	unsigned char *m = fill(len, 0x33);
	uint64_t t0, t1;
	pid_t pid;

	printf("filled %zu MiB\n", mib);
	go_ahead(wait);
	t0 = now_ns();
	pid = fork();

	if (pid == 0) {
		uint64_t c0 = now_ns();

		for (int i = 0; i < TIME_TOUCH; i++)
			m[(size_t)i * (len / TIME_TOUCH)] = 1;
		printf("child wrote %d blocks in %llu us\n", TIME_TOUCH,
		       (unsigned long long)((now_ns() - c0) / 1000));
		fflush(stdout);
		go_ahead(wait);
		_exit(0);
	}
	t1 = now_ns();
	printf("fork of %zu MiB returned in the parent after %llu us\n", mib,
	       (unsigned long long)((t1 - t0) / 1000));
	fflush(stdout);
	return WEXITSTATUS(wait_status(pid));
}

static int bomb(int hold)
{
	static pid_t kids[BOMB_MAX];
	int n = 0, err = 0;

	while (n < BOMB_MAX) {
		pid_t pid = fork();

		if (pid == 0) {
			pause();
			_exit(0);
		}
		if (pid < 0) {
			err = errno;
			break;
		}
		kids[n++] = pid;
	}
	printf("fork failed after %d children: %s\n", n, strerror(err));
	fflush(stdout);
	sleep((unsigned)hold);
	for (int i = 0; i < n; i++)
		kill(kids[i], SIGKILL);
	for (int i = 0; i < n; i++)
		wait_status(kids[i]);
	printf("all %d reaped\n", n);
	return 0;
}

/* The pipes of fork budget: each child reports one byte on @report, then waits for
 * @hold to close; and the mapping its SIGBUS must lie in. */
static int budget_report = -1, budget_hold = -1;
static unsigned char *budget_map;
static size_t budget_len;

static void budget_wait_and_exit(char what)
{
	char c;

	if (write(budget_report, &what, 1) != 1)
		_exit(3);
	while (read(budget_hold, &c, 1) > 0)
		;
	_exit(0);
}

static void budget_sigbus(int sig, siginfo_t *si, void *uc)
{
	unsigned char *at = si->si_addr;

	(void)sig;
	(void)uc;
	budget_wait_and_exit(si->si_code == BUS_ADRERR && at >= budget_map &&
			     at < budget_map + budget_len ? 'B' : 'b');
}

static void budget_child(size_t len)
{
	struct sigaction sa = { .sa_sigaction = budget_sigbus, .sa_flags = SA_SIGINFO };

	sigaction(SIGBUS, &sa, NULL);
	budget_len = len;
	budget_map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (budget_map == MAP_FAILED)
		budget_wait_and_exit('M');
	for (size_t off = 0; off < len; off += 4096)
		budget_map[off] = 1;
	budget_wait_and_exit('T');
}

/* Reports and deaths until every child forked did one or the other. */
struct budget_count {
	int all, bus, killed_bus, other, reaped;
};

static void budget_collect(int report, int forked, struct budget_count *k)
{
	for (int done = 0; done < forked;) {
		struct pollfd pf = { .fd = report, .events = POLLIN };
		pid_t pid;
		char c;
		int st;

		if (poll(&pf, 1, 200) > 0 && read(report, &c, 1) == 1) {
			k->all += c == 'T';
			k->bus += c == 'B';
			k->other += c != 'T' && c != 'B';
			done++;
			continue;
		}
		while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
			if (WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS)
				k->killed_bus++;
			else
				k->other++;
			k->reaped++;
			done++;
		}
	}
}

static int budget(int n, size_t mib)
{
	struct budget_count k = { 0 };
	int report[2], hold[2], forked = 0, err = 0;
	char line[16];

	if (pipe(report) || pipe(hold)) {
		perror("pipe");
		return 1;
	}
	budget_report = report[1];
	budget_hold = hold[0];
	for (; forked < n; forked++) {
		pid_t pid = fork();

		if (pid == 0) {
			close(hold[1]);
			close(report[0]);
			budget_child(mib * MIB);
		}
		if (pid < 0) {
			err = errno;
			break;
		}
	}
	close(hold[0]);
	close(report[1]);
	budget_collect(report[0], forked, &k);
	printf("budget: %d children forked, %d wrote all %zu MiB, %d got SIGBUS, %d killed by "
	       "SIGBUS, %d other\n", forked, k.all, mib, k.bus, k.killed_bus, k.other);
	if (forked < n)
		printf("fork %d failed: %s\n", forked + 1, strerror(err));
	printf("holding\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		line[0] = '\0';
	close(hold[1]);
	for (int i = k.reaped; i < forked; i++)
		wait(NULL);
	printf("all %d reaped\n", forked);
	return 0;
}

/* Child @i's byte at @off of its mapping. */
static unsigned char hold_byte(int i, size_t off)
{
	return (unsigned char)(i * 37 + off / 4096 * 11 + off % 251 + 1);
}

#define HOLD_SHARED (3 * MIB) /* shared memory: more than one piece of a section */
static unsigned char *hold_shared;

static void hold_child(int i, size_t len, int report, int hold)
{
	unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);
	char c = 'F';

	if (m == MAP_FAILED)
		c = 'M';
	for (size_t off = 0; c == 'F' && off < len; off++)
		m[off] = hold_byte(i, off);
	if (write(report, &c, 1) != 1)
		_exit(3);
	while (read(hold, &c, 1) > 0)
		;
	c = 'V';
	for (size_t off = 0; m != MAP_FAILED && off < len; off++)
		if (m[off] != hold_byte(i, off)) {
			c = 'X';
			break;
		}
	for (size_t off = 0; off < HOLD_SHARED; off++)
		if (hold_shared[off] != hold_byte(99, off)) {
			c = 'S';
			break;
		}
	_exit(write(report, &c, 1) == 1 ? 0 : 3);
}

/* @n reports from the children: how many were @want. */
static int hold_count(int report, int n, char want)
{
	int got = 0;
	char c;

	for (int i = 0; i < n && read(report, &c, 1) == 1; i++)
		got += c == want;
	return got;
}

static int hold_tree(int n, size_t mib)
{
	int report[2], hold[2], filled, kept;
	char line[16];

	if (pipe(report) || pipe(hold)) {
		perror("pipe");
		return 1;
	}
	hold_shared = mmap(NULL, HOLD_SHARED, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			   -1, 0);
	if (hold_shared == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	for (size_t off = 0; off < HOLD_SHARED; off++)
		hold_shared[off] = hold_byte(99, off);
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			close(hold[1]);
			close(report[0]);
			hold_child(i, mib * MIB, report[1], hold[0]);
		}
	}
	close(hold[0]);
	close(report[1]);
	filled = hold_count(report[0], n, 'F');
	printf("holding: %d of %d children filled %zu MiB\n", filled, n, mib);
	if (!fgets(line, sizeof(line), stdin))
		line[0] = '\0';
	close(hold[1]);
	kept = hold_count(report[0], n, 'V');
	for (int i = 0; i < n; i++)
		wait(NULL);
	printf("kept: %d of %d children kept all %zu MiB\n", kept, n, mib);
	return kept == n && filled == n ? 0 : 1;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 2 && !strcmp(argv[1], "time"))
		return timed(strtoul(argv[2], NULL, 10), argc > 3 && !strcmp(argv[3], "wait"));
	if (argc > 3 && !strcmp(argv[1], "budget"))
		return budget(atoi(argv[2]), strtoul(argv[3], NULL, 10));
	if (argc > 3 && !strcmp(argv[1], "hold"))
		return hold_tree(atoi(argv[2]), strtoul(argv[3], NULL, 10));
	if (argc > 1 && !strcmp(argv[1], "bomb"))
		return bomb(argc > 2 ? atoi(argv[2]) : 0);
	return basic(argc > 1 ? strtoul(argv[1], NULL, 10) : 64);
}
