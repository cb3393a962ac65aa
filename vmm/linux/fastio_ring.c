/*
 * fastio_ring.c - the exitless socket path's writes: the guest's records taken from
 * the ring and sent in order, what a socket cannot take kept in its backlog (and a
 * closed socket's lingering until sent), the flusher that sends at least every
 * FIO_FLUSH_NS, and the check before any guest system call that nothing written is
 * left behind it (fastio.c has the rest of the path).
 *
 * Nothing read from the ring is trusted: every record is bounds-checked, and a ring
 * that does not add up switches the exitless path off. Lock order: p->lock, then
 * fio->lock.
 */
#include "fastio_impl.h"
#include "../../base/role.h"
#include "../../base/mono.h"
#include "../../base/log.h"
#include "../../base/x86.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

void fio_unpend(struct lx_fastio *f, int fd)
{
	for (int i = 0; i < f->n_pending; i++)
		if (f->pending[i] == fd) {
			f->pending[i] = f->pending[--f->n_pending];
			return;
		}
}

/* Keep sending a closed socket's backlog from our own duplicate of it. */
void fio_linger(struct lx_fastio *f, struct fio_sock *s)
{
	struct fio_linger *l = calloc(1, sizeof(*l));

	if (l)
		l->host = fcntl(s->host, F_DUPFD_CLOEXEC, 3);
	if (!l || l->host < 0) {
		log_warn("fastio: %zu bytes to a closed socket could not be kept: %s", s->pend_len,
			 strerror(errno));
		free(l);
		return;
	}
	l->pend = s->pend;
	l->len = s->pend_len;
	l->deadline = (int64_t)mono_ns() + FIO_LINGER_NS;
	l->next = f->lingering;
	f->lingering = l;
	f->stats.lingered++;
	s->pend = NULL;
}

static int fio_append(struct fio_sock *s, const uint8_t *data, size_t len)
{
	if (s->pend_len + len > s->pend_cap) {
		size_t cap = s->pend_cap ? s->pend_cap : 4096;
		uint8_t *n;

		while (cap < s->pend_len + len)
			cap *= 2;
		n = realloc(s->pend, cap);
		if (!n)
			return -ENOMEM;
		s->pend = n;
		s->pend_cap = cap;
	}
	memcpy(s->pend + s->pend_len, data, len);
	s->pend_len += len;
	return 0;
}

/* Send what @s owes without blocking; true when nothing is left. */
static bool fio_drain(struct lx_fastio *f, int fd, struct fio_sock *s)
{
	size_t done = 0;

	while (done < s->pend_len) {
		ssize_t n =
		    send(s->host, s->pend + done, s->pend_len - done, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
				s->err = errno;
				done = s->pend_len; /* the peer is gone: so are the bytes */
			}
			if (errno != EINTR)
				break;
			continue;
		}
		done += (size_t)n;
		f->stats.bytes_out += (uint64_t)n;
	}
	memmove(s->pend, s->pend + done, s->pend_len - done);
	s->pend_len -= done;
	if (s->pend_len == 0) {
		fio_unpend(f, fd);
		if (!s->err)
			__atomic_fetch_or(&f->area->fd_state[fd], FASTIO_WRITE, __ATOMIC_RELEASE);
	}
	return s->pend_len == 0;
}

/* One record's bytes to its socket, or to its backlog. */
static void fio_deliver(struct lx_fastio *f, uint32_t fd, const uint8_t *data, size_t len)
{
	struct fio_sock *s = fd < FASTIO_FDS ? &f->socks[fd] : NULL;
	ssize_t n = 0;

	if (!s || s->host < 0 || s->err) {
		f->stats.dropped++;
		return;
	}
	if (!s->pend_len) {
		n = send(s->host, data, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			/* Like a reset connection's kernel buffer: the guest learns of it on
			 * its next call on the socket. */
			s->err = errno;
			__atomic_fetch_and(&f->area->fd_state[fd], (uint8_t)~FASTIO_WRITE,
					   __ATOMIC_RELEASE);
			return;
		}
		if (n < 0)
			n = 0;
		f->stats.bytes_out += (uint64_t)n;
		if ((size_t)n == len)
			return;
		f->pending[f->n_pending++] = (int)fd;
		f->stats.backlogs++;
		/* Later writes take the system call until the backlog has gone. */
		__atomic_fetch_and(&f->area->fd_state[fd], (uint8_t)~FASTIO_WRITE,
				   __ATOMIC_RELEASE);
	}
	if (fio_append(s, data + n, len - (size_t)n)) {
		log_warn("fastio: out of memory for a socket's backlog; the connection is reset");
		s->err = ECONNRESET;
		shutdown(s->host, SHUT_RDWR);
	}
}

/* The guest broke the ring's rules: it gets the system calls back. */
static void fio_disable(struct lx_fastio *f, const char *why)
{
	log_warn("fastio: %s; the guest's socket calls exit to the monitor from now on", why);
	__atomic_store_n(&f->area->enabled, 0, __ATOMIC_RELEASE);
	memset(f->area->fd_state, 0, sizeof(f->area->fd_state));
	__atomic_store_n(&f->head, __atomic_load_n(&f->area->ring_tail, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELAXED);
}

static void fio_flush_locked(struct lx_fastio *f)
{
	uint64_t tail = __atomic_load_n(&f->area->ring_tail, __ATOMIC_ACQUIRE);
	uint64_t head = f->head;

	if (tail - head > FASTIO_RING_SIZE || tail < head) {
		fio_disable(f, "ring positions out of range");
		return;
	}
	while (head < tail) {
		uint64_t pos = head % FASTIO_RING_SIZE, need;
		struct fastio_rec r;

		memcpy(&r, f->area->ring + pos, sizeof(r));
		if (r.fd == FASTIO_REC_WRAP) {
			head += FASTIO_RING_SIZE - pos;
			continue;
		}
		need = sizeof(r) + (((uint64_t)r.len + 7) & ~7ULL);
		if (r.len > FASTIO_REC_MAX || pos + need > FASTIO_RING_SIZE || need > tail - head) {
			fio_disable(f, "a ring record out of bounds");
			return;
		}
		fio_deliver(f, r.fd, f->area->ring + pos + sizeof(r), r.len);
		f->stats.records++;
		head += need;
	}
	if (head > tail) {
		fio_disable(f, "a wrap marker past the ring's end");
		return;
	}
	__atomic_store_n(&f->head, head, __ATOMIC_RELAXED);
	__atomic_store_n(&f->area->ring_head, head, __ATOMIC_RELEASE);
}

static void fio_drain_all(struct lx_fastio *f)
{
	/* Backwards: a drained socket leaves the list by swapping with the last. */
	for (int i = f->n_pending - 1; i >= 0; i--)
		fio_drain(f, f->pending[i], &f->socks[f->pending[i]]);
}

static void fio_drain_lingering(struct lx_fastio *f)
{
	int64_t now = (int64_t)mono_ns();

	for (struct fio_linger **lp = &f->lingering; *lp;) {
		struct fio_linger *l = *lp;
		ssize_t n = send(l->host, l->pend, l->len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0) {
			memmove(l->pend, l->pend + n, l->len - (size_t)n);
			l->len -= (size_t)n;
		}
		if (l->len && (n >= 0 || errno == EAGAIN) && now < l->deadline) {
			lp = &l->next;
			continue;
		}
		*lp = l->next;
		close(l->host);
		free(l->pend);
		free(l);
	}
}

/* The ring's records out, and what the backlogs hold, as far as the sockets take it. */
static void fio_send_locked(struct lx_fastio *f)
{
	if (__atomic_load_n(&f->area->enabled, __ATOMIC_RELAXED))
		fio_flush_locked(f);
	fio_drain_all(f);
}

/* The process is gone: what it wrote still goes out, as the kernel would send a dead
 * process's socket buffers, for FIO_LINGER_NS at most. */
void fio_send_remaining(struct lx_fastio *f)
{
	int64_t deadline = (int64_t)mono_ns() + FIO_LINGER_NS;

	pthread_mutex_lock(&f->lock);
	fio_send_locked(f);
	while ((f->n_pending || f->lingering) && (int64_t)mono_ns() < deadline) {
		fio_drain_all(f);
		fio_drain_lingering(f);
		pthread_mutex_unlock(&f->lock);
		nanosleep(&(struct timespec){ .tv_nsec = FIO_FLUSH_NS }, NULL);
		pthread_mutex_lock(&f->lock);
	}
	pthread_mutex_unlock(&f->lock);
}

/* Before any system call: the guest's earlier writes go first. */
void lx_fastio_flush(struct lx_proc *p)
{
	struct lx_fastio *f = p->fio;

	/* Unlocked first look: most system calls find nothing to send. */
	if (!f || (__atomic_load_n(&f->area->ring_tail, __ATOMIC_ACQUIRE) ==
		       __atomic_load_n(&f->head, __ATOMIC_RELAXED) &&
		   !__atomic_load_n(&f->n_pending, __ATOMIC_RELAXED)))
		return;
	pthread_mutex_lock(&f->lock);
	fio_send_locked(f);
	pthread_mutex_unlock(&f->lock);
}

void *fio_flusher(void *arg)
{
	struct lx_fastio *f = arg;
	struct timespec until;
	int64_t t;

	role_enter(ROLE_HELPER);
	pthread_mutex_lock(&f->lock);
	while (!f->stop) {
		if (f->n_fast == 0 && !f->lingering) {
			pthread_cond_wait(&f->wake, &f->lock);
			continue;
		}
		t = (int64_t)mono_ns() + FIO_FLUSH_NS;
		until = (struct timespec){.tv_sec = t / 1000000000LL, .tv_nsec = t % 1000000000LL};
		pthread_cond_timedwait(&f->wake, &f->lock, &until);
		if (f->stop)
			break;
		fio_send_locked(f);
		fio_drain_lingering(f);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

/*
 * Before a real write-type call on guest fd @fd: 0 to go ahead, or -EAGAIN while the
 * socket still owes earlier bytes (a blocking socket waits for them instead), or an
 * error a flush met. @wait: wait for the backlog even on a non-blocking socket (for
 * shutdown, which must not overtake it), FIO_LINGER_NS at most.
 */
int lx_fastio_before_write(struct lx_call *c, int fd, bool wait)
{
	struct lx_fastio *f = c->p->fio;
	int64_t deadline = 0;
	struct fio_sock *s;
	int rc = 0, host, fl;

	if (!fio_is_fast(f, fd))
		return 0;
	pthread_mutex_lock(&f->lock);
	for (;;) {
		s = &f->socks[fd];
		if (s->host < 0)
			break;
		if (s->err) {
			rc = -s->err;
			s->err = 0;
			if (!s->pend_len)
				__atomic_fetch_or(&f->area->fd_state[fd], FASTIO_WRITE,
						  __ATOMIC_RELEASE);
			break;
		}
		if (!s->pend_len || fio_drain(f, fd, s))
			break;
		host = s->host;
		fl = fcntl(host, F_GETFL);
		if (wait && !deadline)
			deadline = (int64_t)mono_ns() + FIO_LINGER_NS;
		if (fl < 0 || (!wait && (fl & O_NONBLOCK)) || (wait && (int64_t)mono_ns() > deadline)) {
			rc = wait ? 0 : -EAGAIN;
			break;
		}
		pthread_mutex_unlock(&f->lock);
		lx_wait_begin(c);
		poll(&(struct pollfd){.fd = host, .events = POLLOUT}, 1, FIO_POLL_MS);
		lx_wait_end(c);
		pthread_mutex_lock(&f->lock);
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}
