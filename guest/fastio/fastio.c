/*
 * fastio.c - the guest side of the exitless socket path (fastio_abi.h).
 *
 * ccvm preloads this library into dynamic glibc programs (LD_PRELOAD, served from the
 * monitor as FASTIO_PATH). It interposes the libc calls a socket server makes per
 * request: read/recv take bytes the monitor already placed in the socket's slot,
 * write/writev/send append to the ring the monitor drains, and epoll_wait reports a
 * socket whose slot still holds bytes as readable, since the host socket no longer
 * does. Everything else, and every case this code does not recognise, is the
 * ordinary system call, which exits to the monitor; the monitor drains the ring before
 * it performs any system call, so the order of a descriptor's writes is kept.
 *
 * To know which epoll sets watch a socket (and with what event data), the library
 * follows the program's epoll_ctl calls; the monitor fills a socket's slot only while
 * that knowledge is complete (fd_prefetch). No libc function is needed on the fast
 * path, and system calls are made with the instruction itself so this library never
 * calls back into the functions it replaces.
 */
#include "fastio_abi.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define FIO_WATCHES    2 /* epoll registrations of one descriptor we can follow */
#define FIO_UNKNOWN    (-2)
#define FIO_NONE       (-1)
#define FIO_SIGSET     8 /* the kernel's sigset_t */
#define FIO_LEVEL_ONLY (EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE)

struct fio_watch {
	int epfd; /* FIO_NONE, or the epoll instance */
	uint32_t events;
	uint64_t data;
};

/* What the program registered per descriptor; watch[fd][0].epfd == FIO_UNKNOWN when
 * it registered more than FIO_WATCHES times, or in a way we did not see. */
static struct fio_watch watch[FASTIO_FDS][FIO_WATCHES];
static uint8_t is_epfd[FASTIO_FDS];
static struct fastio_area *fio;

static long fio_sys6(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	if ((unsigned long)ret > -4096UL) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

static long fio_sys(long nr, long a, long b, long c, long d, long e)
{
	return fio_sys6(nr, a, b, c, d, e, 0);
}

/* Drop our own entry from LD_PRELOAD: the program sees the environment it was given. */
static void fio_hide_preload(void)
{
	const char *pre = getenv("LD_PRELOAD");
	size_t n = strlen(FASTIO_PATH);

	if (!pre || strncmp(pre, FASTIO_PATH, n) != 0)
		return;
	if (pre[n] == '\0')
		unsetenv("LD_PRELOAD");
	else if (pre[n] == ':')
		setenv("LD_PRELOAD", pre + n + 1, 1);
}

__attribute__((constructor)) static void fio_init(void)
{
	struct fastio_area *a = (struct fastio_area *)getauxval(FASTIO_AUXV);

	for (int fd = 0; fd < FASTIO_FDS; fd++)
		for (int i = 0; i < FIO_WATCHES; i++)
			watch[fd][i].epfd = FIO_NONE;
	if (a && a->magic == FASTIO_MAGIC)
		fio = a;
	fio_hide_preload();
}

static bool fio_on(int fd, uint8_t bit)
{
	return fio && fd >= 0 && fd < FASTIO_FDS &&
	       __atomic_load_n(&fio->enabled, __ATOMIC_RELAXED) &&
	       (__atomic_load_n(&fio->fd_state[fd], __ATOMIC_ACQUIRE) & bit);
}

/* ---- reads: from the slot the monitor filled ---- */

static ssize_t fio_take(int fd, void *buf, size_t n)
{
	unsigned s;

	if (n == 0 || !fio_on(fd, FASTIO_READ))
		return 0;
	s = fio->fd_slot[fd] - 1u;
	if (s >= FASTIO_SLOTS)
		return 0;
	for (;;) {
		uint64_t w = __atomic_load_n(&fio->slot_word[s], __ATOMIC_ACQUIRE);
		uint32_t off = FASTIO_OFF(w), len = FASTIO_LEN(w);
		size_t k;

		if (off >= len || len > FASTIO_SLOT_SIZE)
			return 0;
		k = len - off < n ? len - off : n;
		memcpy(buf, fio->slot_buf[s] + off, k);
		/* Another thread may have taken these bytes meanwhile: then copy again. */
		if (__atomic_compare_exchange_n(&fio->slot_word[s], &w, FASTIO_WORD(off + k, len),
						false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			__atomic_fetch_add(&fio->fast_reads, 1, __ATOMIC_RELAXED);
			return (ssize_t)k;
		}
	}
}

ssize_t read(int fd, void *buf, size_t n)
{
	ssize_t r = fio_take(fd, buf, n);

	return r > 0 ? r : fio_sys(SYS_read, fd, (long)buf, (long)n, 0, 0);
}

ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	ssize_t r = (flags & ~MSG_DONTWAIT) ? 0 : fio_take(fd, buf, n);

	return r > 0 ? r : fio_sys(SYS_recvfrom, fd, (long)buf, (long)n, flags, 0);
}

/* ---- writes: a record in the ring ---- */

static bool fio_put(int fd, const struct iovec *iov, int cnt)
{
	uint64_t head, tail, pos, skip, need, total = 0;
	struct fastio_rec h;
	bool ok;

	for (int i = 0; i < cnt; i++) {
		total += iov[i].iov_len;
		if (total > FASTIO_REC_MAX)
			return false;
	}
	if (total == 0 || !fio_on(fd, FASTIO_WRITE))
		return false;
	while (__atomic_exchange_n(&fio->ring_lock, 1, __ATOMIC_ACQUIRE))
		__builtin_ia32_pause();
	head = __atomic_load_n(&fio->ring_head, __ATOMIC_ACQUIRE);
	tail = fio->ring_tail;
	need = sizeof(h) + ((total + 7) & ~7ULL);
	pos = tail % FASTIO_RING_SIZE;
	/* A record never wraps: a marker sends the reader back to the start. */
	skip = FASTIO_RING_SIZE - pos < need ? FASTIO_RING_SIZE - pos : 0;
	ok = tail - head + skip + need <= FASTIO_RING_SIZE;
	if (ok) {
		if (skip) {
			h = (struct fastio_rec){.fd = FASTIO_REC_WRAP, .len = 0};
			memcpy(fio->ring + pos, &h, sizeof(h));
			pos = 0;
		}
		h = (struct fastio_rec){.fd = (uint32_t)fd, .len = (uint32_t)total};
		memcpy(fio->ring + pos, &h, sizeof(h));
		pos += sizeof(h);
		for (int i = 0; i < cnt; i++) {
			memcpy(fio->ring + pos, iov[i].iov_base, iov[i].iov_len);
			pos += iov[i].iov_len;
		}
		__atomic_store_n(&fio->ring_tail, tail + skip + need, __ATOMIC_RELEASE);
		__atomic_fetch_add(&fio->fast_writes, 1, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&fio->ring_lock, 0, __ATOMIC_RELEASE);
	return ok;
}

ssize_t write(int fd, const void *buf, size_t n)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = n};

	if (n <= FASTIO_REC_MAX && fio_put(fd, &iov, 1))
		return (ssize_t)n;
	return fio_sys(SYS_write, fd, (long)buf, (long)n, 0, 0);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	ssize_t total = 0;

	if (cnt > 0 && cnt <= IOV_MAX && fio_put(fd, iov, cnt)) {
		for (int i = 0; i < cnt; i++)
			total += (ssize_t)iov[i].iov_len;
		return total;
	}
	return fio_sys(SYS_writev, fd, (long)iov, cnt, 0, 0);
}

ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = n};

	if (!(flags & ~(MSG_DONTWAIT | MSG_NOSIGNAL)) && n <= FASTIO_REC_MAX &&
	    fio_put(fd, &iov, 1))
		return (ssize_t)n;
	return fio_sys(SYS_sendto, fd, (long)buf, (long)n, flags, 0);
}

/* ---- epoll: following registrations, reporting slots that hold bytes ---- */

static void fio_forget(int fd)
{
	if (fd < 0 || fd >= FASTIO_FDS)
		return;
	for (int i = 0; i < FIO_WATCHES; i++)
		watch[fd][i].epfd = FIO_NONE;
	if (fio)
		fio->fd_prefetch[fd] = 0;
	if (is_epfd[fd]) {
		/* Registrations in a closed instance are gone with it. */
		is_epfd[fd] = 0;
		for (int f = 0; f < FASTIO_FDS; f++)
			for (int i = 0; i < FIO_WATCHES; i++)
				if (watch[f][i].epfd == fd)
					watch[f][i].epfd = FIO_NONE;
	}
}

/* Prefetching is safe while every registration is known and level-triggered. */
static void fio_update_prefetch(int fd)
{
	bool ok = false;

	for (int i = 0; i < FIO_WATCHES; i++) {
		struct fio_watch *w = &watch[fd][i];

		if (w->epfd == FIO_UNKNOWN || (w->epfd >= 0 && (w->events & FIO_LEVEL_ONLY))) {
			ok = false;
			break;
		}
		if (w->epfd >= 0 && (w->events & EPOLLIN))
			ok = true;
	}
	if (fio)
		__atomic_store_n(&fio->fd_prefetch[fd], ok, __ATOMIC_RELEASE);
}

static void fio_watch(int epfd, int op, int fd, const struct epoll_event *ev)
{
	struct fio_watch *w = watch[fd], *free = NULL;

	if (epfd >= 0 && epfd < FASTIO_FDS)
		is_epfd[epfd] = 1;
	if (w[0].epfd == FIO_UNKNOWN)
		return;
	for (int i = 0; i < FIO_WATCHES; i++) {
		if (w[i].epfd == epfd) {
			if (op == EPOLL_CTL_DEL)
				w[i].epfd = FIO_NONE;
			else
				w[i] = (struct fio_watch){epfd, ev->events, ev->data.u64};
			goto out;
		}
		if (w[i].epfd == FIO_NONE && !free)
			free = &w[i];
	}
	if (op == EPOLL_CTL_ADD && free)
		*free = (struct fio_watch){epfd, ev->events, ev->data.u64};
	else if (op == EPOLL_CTL_ADD)
		w[0].epfd = FIO_UNKNOWN;
out:
	fio_update_prefetch(fd);
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	long r = fio_sys(SYS_epoll_ctl, epfd, op, fd, (long)ev, 0);

	if (r == 0 && fd >= 0 && fd < FASTIO_FDS)
		fio_watch(epfd, op, fd, ev);
	return (int)r;
}

/* Events for the sockets of @epfd whose slots hold unread bytes. */
static int fio_ready(int epfd, struct epoll_event *ev, int max)
{
	int n = 0;

	if (!fio || !__atomic_load_n(&fio->enabled, __ATOMIC_RELAXED))
		return 0;
	for (int s = 0; s < FASTIO_SLOTS && n < max; s++) {
		uint64_t w = __atomic_load_n(&fio->slot_word[s], __ATOMIC_ACQUIRE);
		int fd = fio->slot_fd[s];

		if (FASTIO_OFF(w) >= FASTIO_LEN(w) || fd < 0 || fd >= FASTIO_FDS ||
		    fio->fd_slot[fd] != s + 1 || watch[fd][0].epfd == FIO_UNKNOWN)
			continue;
		for (int i = 0; i < FIO_WATCHES && n < max; i++)
			if (watch[fd][i].epfd == epfd && (watch[fd][i].events & EPOLLIN))
				ev[n++] = (struct epoll_event){.events = EPOLLIN,
							       .data.u64 = watch[fd][i].data};
	}
	return n;
}

/* Fold the kernel's @m events after our @n into ours where they name the same data. */
static int fio_merge(struct epoll_event *ev, int n, int m)
{
	int out = n;

	for (int j = n; j < n + m; j++) {
		int i;

		for (i = 0; i < n; i++)
			if (ev[i].data.u64 == ev[j].data.u64)
				break;
		if (i < n)
			ev[i].events |= ev[j].events;
		else
			ev[out++] = ev[j];
	}
	return out;
}

static int fio_wait(int epfd, struct epoll_event *ev, int max, int timeout, const sigset_t *ss)
{
	int n = max > 0 ? fio_ready(epfd, ev, max) : 0;
	long m;

	if (n == 0)
		return (int)fio_sys6(SYS_epoll_pwait, epfd, (long)ev, max, timeout, (long)ss,
				     FIO_SIGSET);
	if (n == max)
		return n;
	m = fio_sys6(SYS_epoll_pwait, epfd, (long)(ev + n), max - n, 0, (long)ss, FIO_SIGSET);
	return m > 0 ? fio_merge(ev, n, (int)m) : n;
}

int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	return fio_wait(epfd, ev, max, timeout, NULL);
}

int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout, const sigset_t *ss)
{
	return fio_wait(epfd, ev, max, timeout, ss);
}

/* ---- descriptors coming and going ---- */

int close(int fd)
{
	fio_forget(fd);
	return (int)fio_sys(SYS_close, fd, 0, 0, 0, 0);
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	long r = fio_sys(SYS_accept4, fd, (long)addr, (long)len, flags, 0);

	if (r >= 0)
		fio_forget((int)r);
	return (int)r;
}

int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	return accept4(fd, addr, len, 0);
}
