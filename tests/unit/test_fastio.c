/*
 * test_fastio.c - the monitor side of the exitless socket path (vmm/linux/fastio.c)
 * against an area this test writes as a guest would, or as a hostile guest would: a
 * socket pair stands in for an accepted connection.
 */
#include "suites.h"
#include "../../guest/fastio/fastio_abi.h"
#include "../../mmu/layout.h"
#include "../../vmm/linux/sys.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define RAM (16ULL << 20)
#define GFD 5 /* the guest's number for the connection */

static struct gmem mem;
static struct lx_proc *p;
static struct fastio_area *a;
static int sv[2]; /* sv[0]: the "accepted" socket the monitor owns; sv[1]: the peer */

static void setup(void)
{
	ck_assert_int_eq(gmem_map(&mem, RAM), 0);
	p = calloc(1, sizeof(*p));
	p->mem = &mem;
	pthread_mutex_init(&p->lock, NULL);
	ck_assert_int_eq(lx_fastio_init(p, LAYOUT_USER_BASE, true), 0);
	a = gmem_user_ptr(&mem, LAYOUT_USER_BASE, sizeof(*a));
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	lx_fastio_accepted(p, GFD, sv[0]);
}

static void teardown(void)
{
	lx_fastio_fini(p);
	close(sv[0]);
	close(sv[1]);
	pthread_mutex_destroy(&p->lock);
	free(p);
	gmem_unmap(&mem);
}

/* Append a record as the guest library does (no wrap handling: tests place it). */
static void put(uint32_t fd, const char *data, uint32_t len)
{
	uint64_t pos = a->ring_tail % FASTIO_RING_SIZE;
	struct fastio_rec h = {.fd = fd, .len = len};

	memcpy(a->ring + pos, &h, sizeof(h));
	memcpy(a->ring + pos + sizeof(h), data, len);
	__atomic_store_n(&a->ring_tail, a->ring_tail + sizeof(h) + ((len + 7) & ~7u),
			 __ATOMIC_RELEASE);
}

static ssize_t peer_read(char *buf, size_t n)
{
	return recv(sv[1], buf, n, MSG_DONTWAIT);
}

/* An accepted socket is announced to the guest: writes through the ring, reads from
 * its slot. */
START_TEST(test_accepted_is_fast)
{
	ck_assert_uint_eq(a->magic, FASTIO_MAGIC);
	ck_assert_uint_eq(a->enabled, 1);
	ck_assert_uint_eq(a->fd_state[GFD], FASTIO_READ | FASTIO_WRITE);
	ck_assert_uint_ge(a->fd_slot[GFD], 1);
	ck_assert_int_eq(a->slot_fd[a->fd_slot[GFD] - 1], GFD);
}
END_TEST

/* Records go out in order, and the head the guest sees moves past them. */
START_TEST(test_flush_in_order)
{
	char buf[64] = {0};

	put(GFD, "first ", 6);
	put(GFD, "second", 6);
	lx_fastio_flush(p);
	ck_assert_int_eq(peer_read(buf, sizeof(buf)), 12);
	ck_assert_str_eq(buf, "first second");
	ck_assert_uint_eq(a->ring_head, a->ring_tail);
}
END_TEST

/* A wrap marker sends the reader to the ring's start. */
START_TEST(test_flush_wrap)
{
	char buf[16] = {0};
	struct fastio_rec w = {.fd = FASTIO_REC_WRAP};
	uint64_t start = 3 * (uint64_t)FASTIO_RING_SIZE - 16;

	/* Both sides agree the ring is empty at 16 bytes before its end. */
	a->ring_tail = start;
	lx_fastio_fini(p);
	ck_assert_int_eq(lx_fastio_init(p, LAYOUT_USER_BASE, false), 0);
	lx_fastio_accepted(p, GFD, sv[0]);
	memcpy(a->ring + FASTIO_RING_SIZE - 16, &w, sizeof(w));
	a->ring_tail += 16;
	put(GFD, "wrapped", 7);
	lx_fastio_flush(p);
	ck_assert_int_eq(peer_read(buf, sizeof(buf)), 7);
	ck_assert_str_eq(buf, "wrapped");
}
END_TEST

/* A guest that breaks the ring's rules loses the path, and nothing is sent: a tail
 * beyond the ring, a record longer than allowed, one running off the ring's end. */
START_TEST(test_flush_hostile)
{
	char buf[16];
	struct fastio_rec h = {.fd = GFD, .len = FASTIO_REC_MAX + 1};

	a->ring_tail = a->ring_head + FASTIO_RING_SIZE + 8;
	lx_fastio_flush(p);
	ck_assert_uint_eq(a->enabled, 0);
	ck_assert_uint_eq(a->fd_state[GFD], 0);
	ck_assert_int_eq(peer_read(buf, sizeof(buf)), -1);

	teardown();
	setup();
	memcpy(a->ring, &h, sizeof(h));
	a->ring_tail = FASTIO_RING_SIZE;
	lx_fastio_flush(p);
	ck_assert_uint_eq(a->enabled, 0);
	ck_assert_int_eq(peer_read(buf, sizeof(buf)), -1);

	teardown();
	setup();
	h.len = 64;
	a->ring_tail = 2 * (uint64_t)FASTIO_RING_SIZE - 16;
	lx_fastio_fini(p);
	ck_assert_int_eq(lx_fastio_init(p, LAYOUT_USER_BASE, false), 0);
	memcpy(a->ring + FASTIO_RING_SIZE - 16, &h, sizeof(h));
	a->ring_tail += 8 + 64;
	lx_fastio_flush(p);
	ck_assert_uint_eq(a->enabled, 0);
}
END_TEST

/* A record for a descriptor that is not a fast socket is dropped, not written to
 * whatever that number is in the monitor. */
START_TEST(test_flush_unknown_fd)
{
	struct lx_fastio_stats st;
	char buf[16];

	put(GFD + 1, "nowhere", 7);
	put(100000, "nowhere", 7);
	lx_fastio_flush(p);
	lx_fastio_get_stats(p, &st);
	ck_assert_uint_eq(st.dropped, 2);
	ck_assert_uint_eq(a->enabled, 1);
	ck_assert_int_eq(peer_read(buf, sizeof(buf)), -1);
}
END_TEST

/* Bytes the socket cannot take wait in its backlog (the guest's writes take the
 * system call meanwhile) and go out, in order, once the peer reads. */
START_TEST(test_backlog)
{
	static char big[FASTIO_REC_MAX], got[1 << 16];
	ssize_t n;

	memset(big, 'x', sizeof(big));
	while (send(sv[0], big, sizeof(big), MSG_DONTWAIT) > 0)
		;
	while (send(sv[0], big, 1, MSG_DONTWAIT) == 1)
		; /* full to the last byte */
	put(GFD, "tail", 4);
	lx_fastio_flush(p);
	ck_assert_uint_eq(a->fd_state[GFD] & FASTIO_WRITE, 0);
	while (peer_read(got, sizeof(got)) > 0)
		;
	lx_fastio_flush(p);
	ck_assert_uint_eq(a->fd_state[GFD] & FASTIO_WRITE, FASTIO_WRITE);
	n = peer_read(got, sizeof(got));
	ck_assert_int_eq(n, 4);
	ck_assert_int_eq(memcmp(got, "tail", 4), 0);
}
END_TEST

/* A record for a connection whose peer has gone: the guest's write had returned, so
 * the socket's next write is a real system call, and it fails with EPIPE (which
 * raises SIGPIPE there, as any failed write does), once. */
START_TEST(test_peer_gone_reported_at_next_write)
{
	struct lx_call c = { .p = p };

	close(sv[1]);
	sv[1] = socket(AF_UNIX, SOCK_STREAM, 0); /* teardown closes something */
	put(GFD, "lost", 4);
	lx_fastio_flush(p);
	ck_assert_uint_eq(a->fd_state[GFD] & FASTIO_WRITE, 0);
	ck_assert_int_eq(lx_fastio_before_write(&c, GFD, false), -EPIPE);
	ck_assert_int_eq(lx_fastio_before_write(&c, GFD, false), 0);
}
END_TEST

/* Read-ahead fills the slot only where the guest asked for it (fd_prefetch); a real
 * read takes from the slot first, and MSG_PEEK leaves the bytes there. */
START_TEST(test_prefetch_and_take)
{
	int slot = a->fd_slot[GFD] - 1;
	char buf[16] = {0};
	struct iovec v = {.iov_base = buf, .iov_len = 5};

	ck_assert_int_eq(write(sv[1], "hello world", 11), 11);
	lx_fastio_prefetch(p);
	ck_assert_uint_eq(a->slot_word[slot], 0); /* not asked */
	a->fd_prefetch[GFD] = 1;
	lx_fastio_prefetch(p);
	ck_assert_uint_eq(a->slot_word[slot], FASTIO_WORD(0, 11));
	ck_assert_int_eq(lx_fastio_take(p, GFD, &v, 1, true), 5);
	ck_assert_uint_eq(a->slot_word[slot], FASTIO_WORD(0, 11));
	ck_assert_int_eq(lx_fastio_take(p, GFD, &v, 1, false), 5);
	ck_assert_str_eq(buf, "hello");
	ck_assert(lx_fastio_readable(p, GFD));
	v.iov_len = sizeof(buf);
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(lx_fastio_take(p, GFD, &v, 1, false), 6);
	ck_assert_str_eq(buf, " world");
	ck_assert(!lx_fastio_readable(p, GFD));
	ck_assert_int_eq(lx_fastio_take(p, GFD, &v, 1, false), 0);
}
END_TEST

/* Slot words the guest corrupted are never followed outside the slot. */
START_TEST(test_take_hostile_word)
{
	int slot = a->fd_slot[GFD] - 1;
	char buf[16];
	struct iovec v = {.iov_base = buf, .iov_len = sizeof(buf)};

	a->slot_word[slot] = FASTIO_WORD(0, FASTIO_SLOT_SIZE + 1);
	ck_assert_int_eq(lx_fastio_take(p, GFD, &v, 1, false), 0);
	ck_assert(!lx_fastio_readable(p, GFD));
	a->slot_word[slot] = FASTIO_WORD(FASTIO_SLOT_SIZE, 5);
	ck_assert_int_eq(lx_fastio_take(p, GFD, &v, 1, false), 0);
}
END_TEST

/* A closed descriptor is no longer fast; a restored process starts with none. */
START_TEST(test_forget_and_restore)
{
	lx_fastio_forget(p, GFD);
	ck_assert_uint_eq(a->fd_state[GFD], 0);
	ck_assert_uint_eq(a->fd_slot[GFD], 0);
	lx_fastio_accepted(p, GFD, sv[0]);
	a->ring_tail += 4096; /* unflushed records at the snapshot instant */
	lx_fastio_fini(p);
	ck_assert_int_eq(lx_fastio_init(p, LAYOUT_USER_BASE, false), 0);
	ck_assert_uint_eq(a->fd_state[GFD], 0);
	ck_assert_uint_eq(a->ring_head, a->ring_tail);
	ck_assert_uint_eq(a->enabled, 1);
}
END_TEST

Suite *fastio_suite(void)
{
	Suite *s = suite_create("fastio");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_accepted_is_fast);
	tcase_add_test(tc, test_flush_in_order);
	tcase_add_test(tc, test_flush_wrap);
	tcase_add_test(tc, test_flush_hostile);
	tcase_add_test(tc, test_flush_unknown_fd);
	tcase_add_test(tc, test_backlog);
	tcase_add_test(tc, test_peer_gone_reported_at_next_write);
	tcase_add_test(tc, test_prefetch_and_take);
	tcase_add_test(tc, test_take_hostile_word);
	tcase_add_test(tc, test_forget_and_restore);
	suite_add_tcase(s, tc);
	return s;
}
