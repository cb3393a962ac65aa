/*
 * sys_poll.c - waiting on descriptors: poll, ppoll, select, pselect6, epoll and eventfd.
 *
 * Guest descriptors are entries of the guest's own table over host descriptors, so
 * each call translates the guest's numbers and then lets the host kernel wait: poll
 * and select become one host poll() over the translated descriptors (select through
 * poll, so host descriptor numbers never meet FD_SETSIZE); an epoll instance is a host
 * epoll instance, and epoll_ctl registers the host descriptor with the guest's event
 * data unchanged, so epoll_wait hands back exactly what the guest registered. Waiting
 * blocks only the calling vCPU, and a snapshot's pause does not wait for it. A signal
 * for the guest ends a wait with EINTR; the masks of ppoll, pselect6 and epoll_pwait
 * hold while the call waits, where signals are delivered (signal.c).
 */
#include "sys.h"
#include "../../base/mono.h"

#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <time.h>

#define NSEC_PER_SEC     1000000000LL
#define NSEC_PER_MSEC    1000000LL
#define LX_POLL_MAX      LX_MAX_FDS /* descriptors one poll or select may name */
#define LX_FD_SET_BITS   (8 * sizeof(uint64_t))

/* How long to wait: -1 for ever, else milliseconds from a timeout in ns (rounded up). */
static int lx_timeout_ms(int64_t ns)
{
	if (ns < 0)
		return -1;
	if (ns / NSEC_PER_MSEC >= INT32_MAX)
		return INT32_MAX;
	return (int)((ns + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC);
}

/* A signal mask argument (ppoll, pselect6, epoll_pwait), read once: where signals are
 * delivered the thread waits with it (signal.c), else it is only checked. -EINVAL,
 * -EFAULT, or a restart code when a signal it lets in is already pending. */
static int lx_wait_sigmask(struct lx_call *c, uint64_t umask, uint64_t size)
{
	uint64_t mask;
	int rc;

	if (!umask)
		return 0;
	rc = lx_sigset_in(c, umask, size, &mask);
	return rc ? rc : lx_sig_wait_mask(c, mask);
}

/* A wait that the host ended with EINTR: a signal for the guest ends the call (EINTR
 * once its handler ran), else it was the monitor's own wake-up, which Linux's poll
 * would not have seen either: EINTR, as before signals were delivered. */
static int64_t lx_wait_eintr(struct lx_call *c)
{
	int rc = lx_sig_eintr(c, LX_ERESTARTNOHAND);

	return rc ? rc : -EINTR;
}

/*
 * Poll @n guest pollfds at @ufds for up to @timeout_ns (-1: for ever). Descriptors the
 * guest does not have report POLLNVAL, negative ones are skipped, as on Linux.
 * Returns the count of ready entries or -errno.
 */
static int64_t lx_poll_fds(struct lx_call *c, uint64_t ufds, uint64_t n, int64_t timeout_ns)
{
	struct pollfd *gfds, *hfds;
	bool buffered = false;
	int64_t rc;

	if (n > LX_POLL_MAX)
		return -EINVAL;
	/* One allocation: the guest's entries (copied once) and the host's. */
	gfds = calloc(2 * (n ? n : 1), sizeof(*gfds));
	if (!gfds)
		return -ENOMEM;
	hfds = gfds + (n ? n : 1);
	if (n && lx_copy_in(c, gfds, ufds, n * sizeof(*gfds))) {
		free(gfds);
		return -EFAULT;
	}
	for (uint64_t i = 0; i < n; i++) {
		hfds[i].fd = gfds[i].fd < 0 ? -1 : lx_host_fd(c, (uint64_t)gfds[i].fd);
		hfds[i].events = gfds[i].events;
		buffered |= (gfds[i].events & POLLIN) && lx_fastio_readable(c->p, gfds[i].fd);
	}
	lx_wait_begin(c);
	/* Bytes read ahead into guest memory make a socket readable, whatever the host
	 * socket says: then do not wait. */
	rc = poll(hfds, n, buffered ? 0 : lx_timeout_ms(timeout_ns));
	if (rc < 0)
		rc = errno == EINTR ? lx_wait_eintr(c) : -errno;
	lx_wait_end(c);
	if (rc < 0)
		goto out;
	rc = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (gfds[i].fd >= 0 && hfds[i].fd < 0)
			hfds[i].revents = POLLNVAL;
		else if (buffered && (gfds[i].events & POLLIN) &&
			 lx_fastio_readable(c->p, gfds[i].fd))
			hfds[i].revents |= POLLIN;
		gfds[i].revents = gfds[i].fd < 0 ? 0 : hfds[i].revents;
		rc += gfds[i].revents != 0;
		/* Only revents goes back, as Linux writes it: fd and events stay the guest's. */
		if (lx_copy_out(c, ufds + i * sizeof(*gfds) + offsetof(struct pollfd, revents),
				&gfds[i].revents, sizeof(gfds[i].revents))) {
			rc = -EFAULT;
			goto out;
		}
	}
out:
	free(gfds);
	return rc;
}

int64_t sys_poll(struct lx_call *c)
{
	int timeout = (int)c->a[2];

	return lx_poll_fds(c, c->a[0], c->a[1], timeout < 0 ? -1 : timeout * NSEC_PER_MSEC);
}

/* A relative timespec timeout (NULL: for ever) as ns. */
static int lx_timespec_timeout(struct lx_call *c, uint64_t uts, int64_t *ns)
{
	*ns = -1;
	return uts ? lx_read_timespec(c, uts, ns) : 0;
}

/* What is left until @deadline (monotonic ns), never below 0. */
static int64_t lx_left_ns(int64_t deadline)
{
	int64_t left = deadline - (int64_t)mono_ns();

	return left < 0 ? 0 : left;
}

/* Write what is left of a timeout back, as the kernel does for ppoll and pselect6. */
static void lx_timespec_left(struct lx_call *c, uint64_t uts, int64_t deadline)
{
	int64_t left = lx_left_ns(deadline);
	struct timespec ts = { .tv_sec = left / NSEC_PER_SEC, .tv_nsec = left % NSEC_PER_SEC };

	if (uts)
		(void)lx_copy_out(c, uts, &ts, sizeof(ts));
}

int64_t sys_ppoll(struct lx_call *c)
{
	int64_t ns, start = (int64_t)mono_ns(), rc;
	int err = lx_timespec_timeout(c, c->a[2], &ns);

	if (!err)
		err = lx_wait_sigmask(c, c->a[3], c->a[4]);
	if (err)
		return err;
	rc = lx_poll_fds(c, c->a[0], c->a[1], ns);
	if (ns >= 0)
		lx_timespec_left(c, c->a[2], start + ns);
	return rc;
}

/* Bytes of an fd_set naming @nfds descriptors, in whole 64-bit words as Linux reads. */
static uint64_t lx_fd_set_bytes(uint64_t nfds)
{
	return (nfds + LX_FD_SET_BITS - 1) / LX_FD_SET_BITS * sizeof(uint64_t);
}

/* The guest's fd_set at @uset (0: none) copied into @set; NULL when there is none. */
static uint64_t *lx_fd_set_in(struct lx_call *c, uint64_t uset, uint64_t nfds, uint64_t *set,
			      int *err)
{
	if (!uset)
		return NULL;
	if (lx_copy_in(c, set, uset, lx_fd_set_bytes(nfds)))
		*err = -EFAULT;
	return set;
}

static bool lx_bit(const uint64_t *set, uint64_t fd)
{
	return set && (set[fd / LX_FD_SET_BITS] >> (fd % LX_FD_SET_BITS) & 1);
}

/* The sets' descriptors as host pollfds in @pfds; *@n of them; -EBADF for a named
 * descriptor the guest does not have. */
static int lx_select_fds(struct lx_call *c, uint64_t nfds, uint64_t *const sets[3],
			 struct pollfd *pfds, uint64_t *n, bool *buffered)
{
	*n = 0;
	for (uint64_t fd = 0; fd < nfds; fd++) {
		short ev = (lx_bit(sets[0], fd) ? POLLIN : 0) | (lx_bit(sets[1], fd) ? POLLOUT : 0) |
			   (lx_bit(sets[2], fd) ? POLLPRI : 0);

		if (!ev)
			continue;
		pfds[*n].fd = lx_host_fd(c, fd);
		if (pfds[*n].fd < 0)
			return -EBADF;
		pfds[*n].events = ev;
		/* Bytes read ahead (fastio.c) make it readable: then do not wait. */
		*buffered |= (ev & POLLIN) && lx_fastio_readable(c->p, (int)fd);
		(*n)++;
	}
	return 0;
}

/* Clear the bits of descriptors that are not ready; the count of bits left. */
static int64_t lx_select_ready(struct lx_call *c, uint64_t nfds, uint64_t *const sets[3],
			       const struct pollfd *pfds, bool buffered)
{
	static const short ready[3] = { POLLIN | POLLHUP | POLLERR, POLLOUT | POLLERR, POLLPRI };
	int64_t count = 0;
	uint64_t n = 0;

	for (uint64_t fd = 0; fd < nfds; fd++) {
		bool any = lx_bit(sets[0], fd) || lx_bit(sets[1], fd) || lx_bit(sets[2], fd);
		short got;

		if (!any)
			continue;
		got = pfds[n++].revents;
		if (buffered && lx_bit(sets[0], fd) && lx_fastio_readable(c->p, (int)fd))
			got |= POLLIN;
		for (int k = 0; k < 3; k++) {
			if (!lx_bit(sets[k], fd))
				continue;
			if (got & ready[k])
				count++;
			else
				sets[k][fd / LX_FD_SET_BITS] &= ~(1ULL << (fd % LX_FD_SET_BITS));
		}
	}
	return count;
}

/*
 * select over poll: the read, write and except sets of @nfds guest descriptors for up
 * to @ns (-1: for ever); the sets are copied in once and the ready ones written back.
 * A named descriptor the guest does not have fails the call with EBADF, as on Linux.
 */
static int64_t lx_select(struct lx_call *c, uint64_t nfds, const uint64_t uset[3], int64_t ns)
{
	uint64_t words = (nfds + LX_FD_SET_BITS - 1) / LX_FD_SET_BITS, n;
	uint64_t *buf, *sets[3];
	struct pollfd *pfds;
	bool buffered = false;
	int64_t rc;
	int err = 0;

	if (nfds > LX_POLL_MAX)
		return -EINVAL;
	buf = calloc(3 * words + 1, sizeof(uint64_t));
	pfds = calloc(nfds ? nfds : 1, sizeof(*pfds));
	if (!buf || !pfds) {
		rc = -ENOMEM;
		goto out;
	}
	for (int k = 0; k < 3; k++)
		sets[k] = lx_fd_set_in(c, uset[k], nfds, buf + k * words, &err);
	rc = err ? err : lx_select_fds(c, nfds, sets, pfds, &n, &buffered);
	if (rc)
		goto out;
	lx_wait_begin(c);
	rc = poll(pfds, n, buffered ? 0 : lx_timeout_ms(ns));
	if (rc < 0)
		rc = errno == EINTR ? lx_wait_eintr(c) : -errno;
	lx_wait_end(c);
	if (rc < 0)
		goto out;
	rc = lx_select_ready(c, nfds, sets, pfds, buffered);
	for (int k = 0; k < 3; k++)
		if (sets[k] && lx_copy_out(c, uset[k], sets[k], lx_fd_set_bytes(nfds)))
			rc = -EFAULT;
out:
	free(buf);
	free(pfds);
	return rc;
}

/* A struct timeval timeout as ns: -EINVAL when negative or malformed; very long ones
 * are clamped (a year of nanoseconds still fits, and is for ever to a guest). */
static int lx_read_timeval(struct lx_call *c, uint64_t utv, int64_t *ns)
{
	struct timeval tv;

	if (lx_copy_in(c, &tv, utv, sizeof(tv)))
		return -EFAULT;
	if (tv.tv_sec < 0 || tv.tv_usec < 0 || tv.tv_usec >= 1000000)
		return -EINVAL;
	if (tv.tv_sec > INT64_MAX / NSEC_PER_SEC - 1)
		*ns = INT64_MAX / 2;
	else
		*ns = tv.tv_sec * NSEC_PER_SEC + tv.tv_usec * 1000;
	return 0;
}

int64_t sys_select(struct lx_call *c)
{
	const uint64_t sets[3] = { c->a[1], c->a[2], c->a[3] };
	int64_t ns = -1, start = (int64_t)mono_ns(), rc, left;

	if (c->a[4]) {
		rc = lx_read_timeval(c, c->a[4], &ns);
		if (rc)
			return rc;
	}
	rc = lx_select(c, c->a[0], sets, ns);
	if (c->a[4]) {
		struct timeval tv;

		left = lx_left_ns(start + ns);
		tv.tv_sec = left / NSEC_PER_SEC;
		tv.tv_usec = (left % NSEC_PER_SEC) / 1000;
		(void)lx_copy_out(c, c->a[4], &tv, sizeof(tv));
	}
	return rc;
}

int64_t sys_pselect6(struct lx_call *c)
{
	/* The sixth argument points at { const sigset_t *mask; size_t size; }. */
	const uint64_t sets[3] = { c->a[1], c->a[2], c->a[3] };
	uint64_t sig[2];
	int64_t ns, start = (int64_t)mono_ns(), rc;
	int err = lx_timespec_timeout(c, c->a[4], &ns);

	if (!err && c->a[5] && lx_copy_in(c, sig, c->a[5], sizeof(sig)))
		err = -EFAULT;
	if (!err && c->a[5])
		err = lx_wait_sigmask(c, sig[0], sig[1]);
	if (err)
		return err;
	rc = lx_select(c, c->a[0], sets, ns);
	if (ns >= 0)
		lx_timespec_left(c, c->a[4], start + ns);
	return rc;
}

static int64_t lx_epoll_new(struct lx_call *c, uint64_t flags)
{
	int host;

	if (flags & ~(uint64_t)EPOLL_CLOEXEC)
		return -EINVAL;
	host = epoll_create1(EPOLL_CLOEXEC);
	if (host < 0)
		return -errno;
	return lx_install(c, host, 0, flags & EPOLL_CLOEXEC);
}

int64_t sys_epoll_create(struct lx_call *c)
{
	return (int)c->a[0] <= 0 ? -EINVAL : lx_epoll_new(c, 0);
}

int64_t sys_epoll_create1(struct lx_call *c)
{
	return lx_epoll_new(c, c->a[0]);
}

/* The host registration carries the guest's event data as is: epoll_wait returns it
 * to the guest untouched, so the guest never sees a host descriptor number. */
int64_t sys_epoll_ctl(struct lx_call *c)
{
	int ep = lx_host_fd(c, c->a[0]), fd = lx_host_fd(c, c->a[2]), op = (int)c->a[1];
	struct epoll_event ev;

	if (ep < 0 || fd < 0)
		return -EBADF;
	if (op != EPOLL_CTL_DEL && lx_copy_in(c, &ev, c->a[3], sizeof(ev)))
		return -EFAULT;
	return host_ret(epoll_ctl(ep, op, fd, op != EPOLL_CTL_DEL ? &ev : NULL));
}

static int64_t lx_epoll_wait(struct lx_call *c, uint64_t epfd, uint64_t uevents, int max,
			     int timeout)
{
	int ep = lx_host_fd(c, epfd);
	struct epoll_event *events;
	int64_t rc;

	if (ep < 0)
		return ep;
	if (max <= 0 || max > INT32_MAX / (int)sizeof(*events))
		return -EINVAL;
	events = lx_uptr(c, uevents, (uint64_t)max * sizeof(*events));
	if (!events)
		return -EFAULT;
	lx_wait_begin(c);
	rc = host_ret(epoll_wait(ep, events, max, timeout < 0 ? -1 : timeout));
	if (rc == -EINTR)
		rc = lx_wait_eintr(c);
	lx_wait_end(c);
	/* The guest will now read the sockets it was told about: have their bytes
	 * ready in guest memory so those reads need no exit. */
	lx_fastio_prefetch(c->p);
	return rc;
}

int64_t sys_epoll_wait(struct lx_call *c)
{
	return lx_epoll_wait(c, c->a[0], c->a[1], (int)c->a[2], (int)c->a[3]);
}

int64_t sys_epoll_pwait(struct lx_call *c)
{
	int err = lx_wait_sigmask(c, c->a[4], c->a[5]);

	return err ? err : lx_epoll_wait(c, c->a[0], c->a[1], (int)c->a[2], (int)c->a[3]);
}

static int64_t lx_eventfd(struct lx_call *c, uint64_t initval, uint64_t flags)
{
	int host;

	if (flags & ~(uint64_t)(EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE))
		return -EINVAL;
	host = eventfd((unsigned)initval, (int)(flags & ~(uint64_t)EFD_CLOEXEC) | EFD_CLOEXEC);
	if (host < 0)
		return -errno;
	return lx_install(c, host, 0, flags & EFD_CLOEXEC);
}

int64_t sys_eventfd(struct lx_call *c)
{
	return lx_eventfd(c, c->a[0], 0);
}

int64_t sys_eventfd2(struct lx_call *c)
{
	return lx_eventfd(c, c->a[0], c->a[1]);
}
