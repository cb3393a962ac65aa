/*
 * fastio_impl.h - what the exitless socket path's two halves share: setup, sockets
 * and reads (fastio.c), and the write ring, its backlogs and the flusher
 * (fastio_ring.c). Lock order: p->lock, then fio->lock.
 */
#ifndef CCVM_LX_FASTIO_IMPL_H
#define CCVM_LX_FASTIO_IMPL_H

#include "fastio.h"
#include "../../guest/fastio/fastio_abi.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define FIO_FLUSH_NS	 1000000LL	       /* the longest a written record waits */
#define FIO_LINGER_NS	 (10LL * 1000000000LL) /* a closed socket's backlog is kept this long */
#define FIO_POLL_MS	 100		       /* a blocking writer's wait for room, per round */

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

/*
 * Is guest fd @fd a fast socket? An unlocked first look, so that the system calls on
 * files, pipes and the like (most of them) never take the lock: a descriptor becomes
 * or stops being fast only in accept and close, which a call racing with them on the
 * same number could not order anyway.
 */
static inline bool fio_is_fast(const struct lx_fastio *f, int fd)
{
	return f && fd >= 0 && fd < FASTIO_FDS &&
	       __atomic_load_n(&f->socks[fd].host, __ATOMIC_RELAXED) >= 0;
}

/* fastio_ring.c, for fastio.c (fio->lock held unless said): what is left sent before
 * the area goes (no lock); the flusher thread's body; a closed socket's backlog kept to
 * send; a socket taken off the list of those with a backlog. */
void fio_send_remaining(struct lx_fastio *f);
void *fio_flusher(void *arg);
void fio_linger(struct lx_fastio *f, struct fio_sock *s);
void fio_unpend(struct lx_fastio *f, int fd);

#endif
