/*
 * fastio.c - the monitor side of the exitless socket path (guest/fastio/fastio_abi.h).
 *
 * A VM exit costs about 100 us here, so a socket server that makes a read and a write
 * per client per event-loop iteration is bounded by its exits, not its work. For a
 * dynamic glibc program the monitor preloads a small library (guest/fastio/fastio.c)
 * and shares an area of guest memory with it:
 *
 *   - sockets accepted from a listener become "fast": the guest's writes to them are
 *     records in a ring, which this file sends, in order, before it performs any system
 *     call of the guest (so a later system call never overtakes them) and at least
 *     every FIO_FLUSH_NS from a flusher thread (so a guest that computes for a long
 *     time after writing does not hold its replies back);
 *   - after each guest epoll_wait, the readable fast sockets are read into their slots
 *     (only non-blocking sockets whose epoll registrations the library follows), and
 *     the guest's read() is answered from the slot; real read-type system calls take
 *     from the slot first, so no byte is reordered;
 *   - what a socket cannot take at once waits in a per-socket backlog; while it does,
 *     the socket's writes are system calls again (EAGAIN for a non-blocking socket
 *     until the backlog has gone), and a socket closed with a backlog lingers until
 *     the backlog is sent (FIO_LINGER_NS at most).
 *
 * Nothing read from the area is trusted: every record and word is bounds-checked, and a
 * ring that does not add up switches the exitless path off (the guest then makes
 * system calls, which still work). Lock order: p->lock, then fio->lock.
 */
#include "fastio.h"
#include "../../base/role.h"
#include "../../base/mono.h"
#include "../../base/log.h"
#include "../../base/x86.h"
#include "../../guest/fastio/fastio_abi.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FIO_FLUSH_NS	 1000000LL	       /* the longest a written record waits */
#define FIO_LINGER_NS	 (10LL * 1000000000LL) /* a closed socket's backlog is kept this long */
#define FIO_PREFETCH_MAX 256		       /* sockets read ahead per epoll_wait */
#define FIO_POLL_MS	 100		       /* a blocking writer's wait for room, per round */
#define FIO_TAKE_TRIES	 64		       /* a slot the guest keeps changing is left to it */

extern const uint8_t ccvm_fastio_lib[], ccvm_fastio_lib_end[];

struct fio_sock {
	int host;      /* the socket (the guest's table owns it); -1: not fast */
	int slot;      /* its read slot, -1 when none */
	int err;       /* an error a flush or read-ahead met, reported by the next call */
	uint8_t *pend; /* bytes the socket has not taken yet */
	size_t pend_len, pend_cap;
};

struct fio_linger {
	int host; /* our own duplicate of a closed socket */
	uint8_t *pend;
	size_t len;
	int64_t deadline;
	struct fio_linger *next;
};

struct lx_fastio {
	struct fastio_area *area; /* host view of the guest's area */
	uint64_t gva;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t flusher;
	bool flusher_started, stop;
	uint64_t head; /* ring bytes consumed: ours, the area's copy is a hint
			* (written under lock, read without for a first look) */
	int ep;	       /* host epoll of every fast socket, data = guest fd */
	int n_fast;
	int n_pending;		      /* fast sockets with a backlog: */
	int pending[FASTIO_FDS];      /* their guest fds */
	int slot_owner[FASTIO_SLOTS]; /* guest fd, -1 */
	struct fio_sock socks[FASTIO_FDS];
	struct fio_linger *lingering;
	struct lx_fastio_stats stats;
};

/* ---- the library, as a file the guest can open ---- */

static int fio_lib_fd = -1;
static pthread_once_t fio_lib_once = PTHREAD_ONCE_INIT;

static void fio_lib_create(void)
{
	size_t len = (size_t)(ccvm_fastio_lib_end - ccvm_fastio_lib);
	int fd = memfd_create("ccvm-fastio.so", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return;
	if (write(fd, ccvm_fastio_lib, len) != (ssize_t)len ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
		close(fd);
		return;
	}
	fio_lib_fd = fd;
}

int lx_fastio_open_lib(int *host_fd)
{
	char path[64];
	int fd;

	pthread_once(&fio_lib_once, fio_lib_create);
	if (fio_lib_fd < 0)
		return -ENOENT;
	/* A new open file description: the guest gets its own offset. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fio_lib_fd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	*host_fd = fd;
	return 0;
}

/* ---- setup ---- */

uint64_t lx_fastio_area_size(void)
{
	return (sizeof(struct fastio_area) + PAGE_SIZE - 1) & ~(uint64_t)(PAGE_SIZE - 1);
}

static void fio_sock_reset(struct fio_sock *s)
{
	free(s->pend);
	*s = (struct fio_sock){.host = -1, .slot = -1};
}

/*
 * Is guest fd @fd a fast socket? An unlocked first look, so that the system calls on
 * files, pipes and the like (most of them) never take the lock: a descriptor becomes
 * or stops being fast only in accept and close, which a call racing with them on the
 * same number could not order anyway.
 */
static bool fio_is_fast(const struct lx_fastio *f, int fd)
{
	return f && fd >= 0 && fd < FASTIO_FDS &&
	       __atomic_load_n(&f->socks[fd].host, __ATOMIC_RELAXED) >= 0;
}

/* Forget every fast socket and unread slot; the ring restarts where the guest is. */
static void fio_area_reset(struct lx_fastio *f)
{
	struct fastio_area *a = f->area;

	memset(a->fd_state, 0, sizeof(a->fd_state));
	memset(a->fd_slot, 0, sizeof(a->fd_slot));
	for (int s = 0; s < FASTIO_SLOTS; s++) {
		a->slot_fd[s] = -1;
		__atomic_store_n(&a->slot_word[s], 0, __ATOMIC_RELEASE);
		f->slot_owner[s] = -1;
	}
	__atomic_store_n(&f->head, __atomic_load_n(&a->ring_tail, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&a->ring_head, f->head, __ATOMIC_RELEASE);
	a->magic = FASTIO_MAGIC;
	__atomic_store_n(&a->enabled, 1, __ATOMIC_RELEASE);
}

static void *fio_flusher(void *arg);
static void fio_send_remaining(struct lx_fastio *f);

/*
 * lx_fastio_init - share the area at guest address @gva (lx_fastio_area_size() bytes
 * of guest RAM, page aligned) with the guest library. @fresh: a new process (the area
 * is zero); otherwise a restored one, whose connections are gone.
 */
int lx_fastio_init(struct lx_proc *p, uint64_t gva, bool fresh)
{
	struct lx_fastio *f = calloc(1, sizeof(*f));
	pthread_condattr_t ca;
	int rc = -ENOMEM;

	if (!f)
		return -ENOMEM;
	f->area = gmem_user_ptr_held(p->mem, gva, lx_fastio_area_size());
	f->gva = gva;
	f->ep = epoll_create1(EPOLL_CLOEXEC);
	if (!f->area || f->ep < 0) {
		rc = f->ep < 0 ? -errno : -EFAULT;
		goto err;
	}
	if (fresh)
		f->area->ring_tail = 0;
	for (int fd = 0; fd < FASTIO_FDS; fd++)
		f->socks[fd] = (struct fio_sock){.host = -1, .slot = -1};
	fio_area_reset(f);
	pthread_mutex_init(&f->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->wake, &ca);
	pthread_condattr_destroy(&ca);
	rc = -pthread_create(&f->flusher, NULL, fio_flusher, f);
	if (rc)
		goto err_sync;
	f->flusher_started = true;
	p->fio = f;
	return 0;
err_sync:
	pthread_cond_destroy(&f->wake);
	pthread_mutex_destroy(&f->lock);
err:
	if (f->ep >= 0)
		close(f->ep);
	free(f);
	return rc;
}

void lx_fastio_fini(struct lx_proc *p)
{
	struct lx_fastio *f = p->fio;

	if (!f)
		return;
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_cond_signal(&f->wake);
	pthread_mutex_unlock(&f->lock);
	if (f->flusher_started)
		pthread_join(f->flusher, NULL);
	fio_send_remaining(f);
	if (f->stats.accepted)
		log_info(
		    "fastio: %llu sockets; %llu reads and %llu writes without an exit; "
		    "%llu read-aheads, %llu records sent; %llu backlogs, %llu closed with "
		    "bytes still owed, %llu records dropped",
		    (unsigned long long)f->stats.accepted, (unsigned long long)f->area->fast_reads,
		    (unsigned long long)f->area->fast_writes,
		    (unsigned long long)f->stats.prefetches, (unsigned long long)f->stats.records,
		    (unsigned long long)f->stats.backlogs, (unsigned long long)f->stats.lingered,
		    (unsigned long long)f->stats.dropped);
	for (int fd = 0; fd < FASTIO_FDS; fd++)
		free(f->socks[fd].pend);
	while (f->lingering) {
		struct fio_linger *l = f->lingering;

		f->lingering = l->next;
		close(l->host);
		free(l->pend);
		free(l);
	}
	close(f->ep);
	pthread_cond_destroy(&f->wake);
	pthread_mutex_destroy(&f->lock);
	free(f);
	p->fio = NULL;
}

uint64_t lx_fastio_gva(const struct lx_proc *p)
{
	return p->fio ? p->fio->gva : 0;
}

int lx_fastio_fork(struct lx_proc *child, const struct lx_proc *parent)
{
	uint32_t off = 0;

	if (!parent->fio)
		return 0;
	return gmem_copy_out(child->mem, parent->fio->gva + offsetof(struct fastio_area, enabled),
			     &off, sizeof(off));
}

void lx_fastio_get_stats(struct lx_proc *p, struct lx_fastio_stats *st)
{
	struct lx_fastio *f = p->fio;

	memset(st, 0, sizeof(*st));
	if (!f)
		return;
	pthread_mutex_lock(&f->lock);
	*st = f->stats;
	st->enabled = __atomic_load_n(&f->area->enabled, __ATOMIC_RELAXED);
	st->fast_reads = __atomic_load_n(&f->area->fast_reads, __ATOMIC_RELAXED);
	st->fast_writes = __atomic_load_n(&f->area->fast_writes, __ATOMIC_RELAXED);
	st->sockets = (uint64_t)f->n_fast;
	pthread_mutex_unlock(&f->lock);
}

/* ---- fast sockets coming and going ---- */

/* Called with p->lock held, right after guest fd @fd got accepted socket @host. */
void lx_fastio_accepted(struct lx_proc *p, int fd, int host)
{
	struct lx_fastio *f = p->fio;
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)fd};
	int slot = -1;

	if (!f || fd < 0 || fd >= FASTIO_FDS)
		return;
	pthread_mutex_lock(&f->lock);
	if (!__atomic_load_n(&f->area->enabled, __ATOMIC_RELAXED))
		goto out;
	for (int s = 0; s < FASTIO_SLOTS && slot < 0; s++)
		if (f->slot_owner[s] < 0)
			slot = s;
	if (slot >= 0 && epoll_ctl(f->ep, EPOLL_CTL_ADD, host, &ev) < 0)
		slot = -1;
	f->socks[fd] = (struct fio_sock){.host = host, .slot = slot};
	f->n_fast++;
	if (slot >= 0) {
		f->slot_owner[slot] = fd;
		f->area->slot_fd[slot] = fd;
		__atomic_store_n(&f->area->slot_word[slot], 0, __ATOMIC_RELEASE);
		f->area->fd_slot[fd] = (uint16_t)(slot + 1);
	}
	__atomic_store_n(&f->area->fd_state[fd],
			 (uint8_t)(FASTIO_WRITE | (slot >= 0 ? FASTIO_READ : 0)), __ATOMIC_RELEASE);
	f->stats.accepted++;
	pthread_cond_signal(&f->wake);
out:
	pthread_mutex_unlock(&f->lock);
}

static void fio_unpend(struct lx_fastio *f, int fd)
{
	for (int i = 0; i < f->n_pending; i++)
		if (f->pending[i] == fd) {
			f->pending[i] = f->pending[--f->n_pending];
			return;
		}
}

/* Keep sending a closed socket's backlog from our own duplicate of it. */
static void fio_linger(struct lx_fastio *f, struct fio_sock *s)
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

/* Guest fd @fd is being closed or replaced; called with p->lock held. */
void lx_fastio_forget(struct lx_proc *p, int fd)
{
	struct lx_fastio *f = p->fio;
	struct fio_sock *s;

	if (!f || fd < 0 || fd >= FASTIO_FDS)
		return;
	pthread_mutex_lock(&f->lock);
	s = &f->socks[fd];
	if (s->host >= 0) {
		__atomic_store_n(&f->area->fd_state[fd], 0, __ATOMIC_RELEASE);
		f->area->fd_slot[fd] = 0;
		if (s->slot >= 0) {
			f->slot_owner[s->slot] = -1;
			f->area->slot_fd[s->slot] = -1;
			__atomic_store_n(&f->area->slot_word[s->slot], 0, __ATOMIC_RELEASE);
		}
		epoll_ctl(f->ep, EPOLL_CTL_DEL, s->host, NULL);
		if (s->pend_len) {
			fio_unpend(f, fd);
			fio_linger(f, s);
		}
		f->n_fast--;
		fio_sock_reset(s);
	}
	pthread_mutex_unlock(&f->lock);
}

/* ---- writes: the ring and the backlogs ---- */

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
static void fio_send_remaining(struct lx_fastio *f)
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

static void *fio_flusher(void *arg)
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

/* ---- reads: ahead into the slots, and taking from them ---- */

static void fio_prefetch_one(struct lx_fastio *f, int fd)
{
	struct fio_sock *s = &f->socks[fd];
	uint64_t w;
	ssize_t n;
	int fl;

	if (s->host < 0 || s->slot < 0 || s->err ||
	    !__atomic_load_n(&f->area->fd_prefetch[fd], __ATOMIC_ACQUIRE))
		return;
	w = __atomic_load_n(&f->area->slot_word[s->slot], __ATOMIC_ACQUIRE);
	if (FASTIO_OFF(w) < FASTIO_LEN(w) && FASTIO_LEN(w) <= FASTIO_SLOT_SIZE)
		return; /* the guest has not read the last batch yet */
	/* A blocking socket's reader may be waiting in the host: leave its bytes there. */
	fl = fcntl(s->host, F_GETFL);
	if (fl < 0 || !(fl & O_NONBLOCK))
		return;
	n = recv(s->host, f->area->slot_buf[s->slot], FASTIO_SLOT_SIZE, MSG_DONTWAIT);
	if (n > 0) {
		__atomic_store_n(&f->area->slot_word[s->slot], FASTIO_WORD(0, n), __ATOMIC_RELEASE);
		f->stats.prefetches++;
		f->stats.bytes_in += (uint64_t)n;
	} else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
		s->err = errno;
	}
}

/* After a guest epoll_wait: read ahead what the readable fast sockets hold. */
void lx_fastio_prefetch(struct lx_proc *p)
{
	struct lx_fastio *f = p->fio;
	struct epoll_event ev[FIO_PREFETCH_MAX];
	int n;

	if (!f || !__atomic_load_n(&f->n_fast, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&f->lock);
	if (__atomic_load_n(&f->area->enabled, __ATOMIC_RELAXED)) {
		n = epoll_wait(f->ep, ev, FIO_PREFETCH_MAX, 0);
		for (int i = 0; i < n; i++)
			if (ev[i].data.u32 < FASTIO_FDS)
				fio_prefetch_one(f, (int)ev[i].data.u32);
	}
	pthread_mutex_unlock(&f->lock);
}

/*
 * A real read-type call on guest fd @fd: bytes already in its slot come first.
 * Returns how many were copied into @iov (0: none, go to the host), or an error a
 * read-ahead met. @peek leaves them in the slot.
 */
int64_t lx_fastio_take(struct lx_proc *p, int fd, const struct iovec *iov, int cnt, bool peek)
{
	struct lx_fastio *f = p->fio;
	struct fio_sock *s;
	int64_t rc = 0;

	if (!fio_is_fast(f, fd))
		return 0;
	pthread_mutex_lock(&f->lock);
	s = &f->socks[fd];
	if (s->host >= 0 && s->slot >= 0) {
		uint64_t *word = &f->area->slot_word[s->slot];
		uint64_t w = __atomic_load_n(word, __ATOMIC_ACQUIRE);
		uint32_t off = FASTIO_OFF(w), len = FASTIO_LEN(w);

		for (int tries = 0; off < len && len <= FASTIO_SLOT_SIZE && tries < FIO_TAKE_TRIES;
		     tries++) {
			size_t done = 0;

			for (int i = 0; i < cnt && off + done < len; i++) {
				size_t k = iov[i].iov_len < len - off - done ? iov[i].iov_len
									     : len - off - done;

				memcpy(iov[i].iov_base, f->area->slot_buf[s->slot] + off + done, k);
				done += k;
			}
			if (peek || __atomic_compare_exchange_n(
					word, &w, FASTIO_WORD(off + done, len), false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
				rc = (int64_t)done;
				break;
			}
			off = FASTIO_OFF(w); /* a guest thread took some meanwhile */
			len = FASTIO_LEN(w);
		}
	}
	if (rc == 0 && s->host >= 0 && s->err && !s->pend_len) {
		rc = -s->err;
		s->err = 0;
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

/* For poll and select: does guest fd @fd have bytes waiting in its slot? */
bool lx_fastio_readable(struct lx_proc *p, int fd)
{
	struct lx_fastio *f = p->fio;
	uint16_t slot;
	uint64_t w;

	if (!fio_is_fast(f, fd))
		return false;
	pthread_mutex_lock(&f->lock);
	slot = f->socks[fd].host >= 0 ? (uint16_t)(f->socks[fd].slot + 1) : 0;
	w = slot ? __atomic_load_n(&f->area->slot_word[slot - 1], __ATOMIC_ACQUIRE) : 0;
	if (slot && f->socks[fd].err)
		w = FASTIO_WORD(0, 1); /* the error is what a read returns */
	pthread_mutex_unlock(&f->lock);
	return FASTIO_OFF(w) < FASTIO_LEN(w) && FASTIO_LEN(w) <= FASTIO_SLOT_SIZE;
}
