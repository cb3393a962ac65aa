/*
 * fastio_abi.h - the exitless socket path: memory shared by the monitor and the guest
 * library guest/fastio/fastio.c, which a dynamic glibc program loads through
 * LD_PRELOAD.
 *
 * Why: every guest system call is a VM exit (about 100 us here), so a server that
 * makes one read and one write per client per event-loop iteration spends nearly all
 * its time exiting. With this area, an iteration costs one exit (its epoll_wait):
 *
 *   - write/writev on a socket the monitor marked FASTIO_WRITE append a record to
 *     the ring and return at once; the monitor sends the records, in order, before it
 *     handles any system call of the guest and at least every millisecond;
 *   - after an epoll_wait the monitor reads what each readable socket has into that
 *     socket's slot, and read() is served from the slot; the library's epoll_wait
 *     reports a socket whose slot still holds data as readable.
 *
 * The guest owns ring_tail, ring_lock, fd_prefetch and the consuming side of the
 * slot words; the monitor owns everything else. The monitor trusts nothing it reads
 * here: a record or word out of bounds stops the exitless path, never the monitor.
 */
#ifndef CCVM_FASTIO_ABI_H
#define CCVM_FASTIO_ABI_H

#include <stdint.h>

#define FASTIO_MAGIC	 0x31696f66766d6363ULL /* "ccvmfio1" */
#define FASTIO_AUXV	 0x63637601	       /* auxv type: the area's guest address */
#define FASTIO_PATH	 "/.ccvm/fastio.so"    /* where the guest finds the library */
#define FASTIO_FDS	 4096		       /* guest fds below this may be exitless */
#define FASTIO_SLOTS	 256		       /* sockets with a read slot at once */
#define FASTIO_SLOT_SIZE (16 << 10)
#define FASTIO_RING_SIZE (1 << 20)
#define FASTIO_REC_MAX	 (64 << 10)  /* larger writes take the system call */
#define FASTIO_REC_WRAP	 0xffffffffu /* record fd: continue at the ring's start */

/* fd_state bits (monitor). */
#define FASTIO_READ  0x1 /* reads are served from slot fd_slot[fd] - 1 */
#define FASTIO_WRITE 0x2 /* writes may go through the ring */

/* A ring record: header, then len bytes, padded to 8. */
struct fastio_rec {
	uint32_t fd;
	uint32_t len;
};

/* A slot word: bytes [off, len) of the slot are unread. */
#define FASTIO_WORD(off, len) ((uint64_t)(off) | (uint64_t)(len) << 32)
#define FASTIO_OFF(w)	      ((uint32_t)(w))
#define FASTIO_LEN(w)	      ((uint32_t)((w) >> 32))

struct fastio_area {
	uint64_t magic;
	uint32_t enabled;		  /* monitor: 0 makes the library a pass-through */
	uint32_t ring_lock;		  /* guest: serialises the writing threads */
	uint64_t ring_head;		  /* monitor: bytes of the ring consumed */
	uint64_t ring_tail;		  /* guest: bytes of the ring produced */
	uint64_t fast_reads, fast_writes; /* guest: calls answered without an exit */
	uint8_t fd_state[FASTIO_FDS];	  /* monitor: FASTIO_READ | FASTIO_WRITE */
	uint8_t fd_prefetch[FASTIO_FDS];  /* guest: 1 = watched by one epoll, EPOLLIN, level */
	uint16_t fd_slot[FASTIO_FDS];	  /* monitor: slot + 1 */
	int32_t slot_fd[FASTIO_SLOTS];	  /* monitor: the fd a slot belongs to, -1 */
	uint64_t slot_word[FASTIO_SLOTS]; /* both: FASTIO_WORD(off, len) */
	uint8_t ring[FASTIO_RING_SIZE] __attribute__((aligned(4096)));
	uint8_t slot_buf[FASTIO_SLOTS][FASTIO_SLOT_SIZE];
};

#endif
