/*
 * fuzz_fastio.c - libFuzzer target: the monitor's consumer of the exitless socket
 * ring (vmm/linux/fastio.c). The guest owns the ring's bytes and can write the
 * positions and slot words too, so the input sets all of them: the ring head and
 * tail, the slot word of the connection, and the first bytes of the ring. Then the
 * monitor flushes the ring and takes read-ahead bytes, as it does on a VM exit.
 * A socket pair stands in for the accepted connection.
 */
#include "../../guest/fastio/fastio_abi.h"
#include "../../mmu/layout.h"
#include "../../vmm/linux/sys.h"
#include "../../base/log.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define RAM         (32ULL << 20)
#define GFD         5
#define FUZZ_RING   (64 << 10) /* ring bytes an input may set */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_head {
	uint64_t ring_head, ring_tail, slot_word;
};

static struct gmem mem;
static struct lx_proc proc;

static void fuzz_drain(int fd)
{
	static char sink[1 << 16];

	while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
		;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[4096];
	struct fuzz_head h;
	struct fastio_area *a;
	struct iovec v = { .iov_base = out, .iov_len = sizeof(out) };
	int sv[2];

	log_set_level(LOG_ERR);
	if (!mem.host) {
		if (gmem_map(&mem, RAM))
			abort();
		proc.mem = &mem;
		pthread_mutex_init(&proc.lock, NULL);
	}
	if (size < sizeof(h))
		return 0;
	memcpy(&h, data, sizeof(h));
	memset(mem.host + LAYOUT_USER_BASE, 0, lx_fastio_area_size());
	if (lx_fastio_init(&proc, LAYOUT_USER_BASE, true) ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
		abort();
	a = gmem_user_ptr(&mem, LAYOUT_USER_BASE, sizeof(*a));
	pthread_mutex_lock(&proc.lock);
	lx_fastio_accepted(&proc, GFD, sv[0]);
	pthread_mutex_unlock(&proc.lock);
	if (send(sv[1], "read ahead", 10, 0) != 10)
		abort();
	lx_fastio_prefetch(&proc);
	size -= sizeof(h);
	memcpy(a->ring, data + sizeof(h), size < FUZZ_RING ? size : FUZZ_RING);
	a->ring_head = h.ring_head;
	a->ring_tail = h.ring_tail;
	if (a->fd_slot[GFD])
		a->slot_word[(a->fd_slot[GFD] - 1) % FASTIO_SLOTS] = h.slot_word;
	lx_fastio_flush(&proc);
	fuzz_drain(sv[1]);
	(void)lx_fastio_take(&proc, GFD, &v, 1, false);
	lx_fastio_fini(&proc);
	close(sv[0]);
	close(sv[1]);
	return 0;
}
