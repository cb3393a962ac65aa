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
 * system calls, which still work). Lock order: p->lock, then fio->lock. This file
 * sets the path up, takes sockets on and off it and reads ahead; the writes are
 * fastio_ring.c's.
 */
#include "fastio_impl.h"
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

#define FIO_PREFETCH_MAX 256		       /* sockets read ahead per epoll_wait */
#define FIO_TAKE_TRIES	 64		       /* a slot the guest keeps changing is left to it */

extern const uint8_t ccvm_fastio_lib[], ccvm_fastio_lib_end[];

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
