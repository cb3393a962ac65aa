/*
 * shm.c - memory shared between processes as a program sees it: MAP_SHARED anonymous
 * and memfd mappings written by one process and read by another (parent, child,
 * grandchild), atomics and a shared futex across them, a memfd's bytes the same through
 * mmap and read/write, a shared mapping grown with mremap, and what must stay apart
 * (private neighbours, MAP_PRIVATE of a memfd, memory mapped where a shared mapping
 * was). Every line it prints is independent of scheduling, so the e2e tests compare
 * ccvm's output with the host's line by line.
 *
 * Modes:
 *   shm            the checks above
 *   shm slow N [STOP]  a child adds 1 to a shared counter and writes its count into a
 *                  memfd every 10 ms, N times or until the file STOP exists; the parent
 *                  waits until the child says it is done (a third shared word) and
 *                  prints the counter with the memfd's bytes (a snapshot or migration
 *                  taken meanwhile goes on right only if both processes still share
 *                  the two). STOP lets a test hold the pair running for as long as it
 *                  needs, however slow the machine, instead of guessing a duration.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE      4096
#define FUTEX_WAIT_SHARED 0 /* futex(2) operations without the private flag (musl has */
#define FUTEX_WAKE_SHARED 1 /* no linux/futex.h) */
#define ADDS      100000 /* each side's atomic additions to one shared counter */
#define SLOW_NS   10000000L

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void *map_shared(size_t len)
{
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		die("mmap shared");
	return m;
}

static int child_status(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		die("waitpid");
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A shared anonymous page written by the child; a private page next to it is not. */
static void check_anon(void)
{
	volatile int *shared = map_shared(PAGE);
	int *priv = malloc(sizeof(int));
	pid_t pid;

	*priv = 0;
	pid = fork();
	if (pid == 0) {
		shared[0] = 42;
		*priv = 7;
		_exit(0);
	}
	child_status(pid);
	printf("anon: parent sees %d, its private copy %d\n", shared[0], *priv);
}

/* A memfd: the child writes through its mapping, the parent reads with pread; the
 * parent writes with pwrite, the child reads through its mapping. */
static void check_memfd(void)
{
	int fd = memfd_create("shm-test", MFD_CLOEXEC);
	char buf[8] = { 0 };
	char *m;
	pid_t pid;

	if (fd < 0 || ftruncate(fd, 2 * PAGE) < 0)
		die("memfd");
	m = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		die("mmap memfd");
	pid = fork();
	if (pid == 0) {
		memcpy(m + PAGE, "world", 6);
		_exit(0);
	}
	child_status(pid);
	if (pread(fd, buf, 6, PAGE) != 6)
		die("pread");
	printf("memfd: the child's mapped write read back: %s\n", buf);
	if (pwrite(fd, "xyz", 4, 100) != 4)
		die("pwrite");
	pid = fork();
	if (pid == 0)
		_exit(strcmp(m + 100, "xyz") == 0 ? 0 : 1);
	printf("memfd: the parent's write seen in the child's mapping: %s\n",
	       child_status(pid) == 0 ? "yes" : "no");
	munmap(m, 2 * PAGE);
	close(fd);
}

/* Both add to one counter at once, with atomics. */
static void check_counter(void)
{
	uint64_t *n = map_shared(PAGE);
	pid_t pid = fork();

	for (int i = 0; i < ADDS; i++)
		__atomic_fetch_add(n, 1, __ATOMIC_RELAXED);
	if (pid == 0)
		_exit(0);
	child_status(pid);
	printf("counter: %llu\n", (unsigned long long)*n);
}

/* A shared futex word: the parent sleeps on it, the child wakes it. */
static void check_futex(void)
{
	uint32_t *w = map_shared(PAGE);
	pid_t pid = fork();

	if (pid == 0) {
		struct timespec nap = { 0, 50000000L };

		nanosleep(&nap, NULL);
		__atomic_store_n(w, 1, __ATOMIC_RELEASE);
		syscall(SYS_futex, w, FUTEX_WAKE_SHARED, 1, NULL, NULL, 0);
		_exit(0);
	}
	while (!__atomic_load_n(w, __ATOMIC_ACQUIRE))
		syscall(SYS_futex, w, FUTEX_WAIT_SHARED, 0, NULL, NULL, 0);
	child_status(pid);
	printf("futex: woken by the child\n");
}

/* A grandchild's write reaches its grandparent. */
static void check_grandchild(void)
{
	volatile int *v = map_shared(PAGE);
	pid_t pid = fork();

	if (pid == 0) {
		pid_t g = fork();

		if (g == 0) {
			v[1] = 3;
			_exit(0);
		}
		_exit(child_status(g));
	}
	child_status(pid);
	printf("grandchild: wrote %d\n", v[1]);
}

/* A shared mapping moved by mremap keeps its bytes and its sharing. */
static void check_mremap(void)
{
	char *m = map_shared(3 * PAGE), *to;
	pid_t pid;

	m[0] = 'a';
	to = mmap(NULL, 3 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (to == MAP_FAILED)
		die("mmap");
	m = mremap(m, 3 * PAGE, 3 * PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	if (m != to)
		die("mremap");
	pid = fork();
	if (pid == 0) {
		m[2 * PAGE] = 'z';
		_exit(0);
	}
	child_status(pid);
	printf("mremap: first byte %c, the child's write at the end %c\n", m[0], m[2 * PAGE]);
}

/* What must stay apart: MAP_PRIVATE of a memfd, and private memory mapped where a
 * shared mapping was. */
static void check_apart(void)
{
	int fd = memfd_create("shm-private", 0), seals;
	volatile char *m, *p;
	void *w;
	pid_t pid;

	if (fd < 0 || ftruncate(fd, PAGE) < 0 || pwrite(fd, "f", 1, 0) != 1)
		die("memfd");
	p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		die("mmap private");
	pid = fork();
	if (pid == 0) {
		p[0] = 'c';
		_exit(0);
	}
	child_status(pid);
	printf("private memfd: parent sees %c\n", p[0]);
	m = map_shared(PAGE);
	m[0] = 9;
	munmap((void *)m, PAGE);
	w = mmap((void *)m, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
		 -1, 0);
	printf("after munmap: %s\n", w == (void *)m && m[0] == 0 ? "zero" : "not zero");
	close(fd);
	fd = memfd_create("shm-sealed", MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, PAGE) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) < 0)
		die("seal");
	seals = fcntl(fd, F_GET_SEALS);
	w = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	printf("sealed memfd (seals %d): writable shared mapping %s\n", seals,
	       w == MAP_FAILED ? strerror(errno) : "made");
	close(fd);
}

static void slow(int n, const char *stop)
{
	uint64_t *count = map_shared(PAGE), *done = count + 1;
	int fd = memfd_create("shm-slow", 0);
	struct timespec nap = { 0, SLOW_NS };
	char *m, buf[32] = { 0 };
	pid_t pid;

	if (fd < 0 || ftruncate(fd, PAGE) < 0)
		die("memfd");
	m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		die("mmap memfd");
	printf("started\n");
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		for (int i = 1; i <= n && !(stop && access(stop, F_OK) == 0); i++) {
			snprintf(m, 32, "count %d", i);
			__atomic_store_n(count, (uint64_t)i, __ATOMIC_RELEASE);
			nanosleep(&nap, NULL);
		}
		__atomic_store_n(done, 1, __ATOMIC_RELEASE);
		_exit(0);
	}
	while (!__atomic_load_n(done, __ATOMIC_ACQUIRE))
		nanosleep(&nap, NULL);
	child_status(pid);
	if (pread(fd, buf, sizeof(buf) - 1, 0) < 0)
		die("pread");
	printf("shared counter %llu, memfd '%s'\n", (unsigned long long)*count, buf);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 2 && strcmp(argv[1], "slow") == 0) {
		slow(atoi(argv[2]), argc > 3 ? argv[3] : NULL);
		return 0;
	}
	check_anon();
	check_memfd();
	check_counter();
	check_futex();
	check_grandchild();
	check_mremap();
	check_apart();
	return 0;
}
