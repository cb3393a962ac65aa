/*
 * test_aspace.c - processes' address spaces: window 0 is the identity map a VM always
 * had, a fork shares blocks read-only, the first write on either side gets the writer
 * its own copy and leaves the other side's bytes alone, and an ending space leaves
 * its readers their data. After every step, the tables agree with the bookkeeping.
 */
#include "suites.h"
#include "../../mmu/aspace.h"
#include "../../mmu/layout.h"
#include "../../mmu/pagetable.h"
#include "../../base/x86.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define WIN (16ULL << 20)     /* LAYOUT_MIN_RAM: 8 blocks, 6 of them user blocks */
#define NWIN 4
#define BLK(b) ((uint64_t)(b) * HUGE_SIZE)

static struct gmem mem;
static struct aspace_set set;

static void setup(void)
{
	ck_assert_int_eq(gmem_map(&mem, WIN * NWIN), 0);
	ck_assert_int_eq(aspace_set_init(&set, &mem, WIN, NWIN), 0);
}

static void teardown(void)
{
	aspace_set_fini(&set);
	gmem_unmap(&mem);
}

/* A byte of @as at @gva as its own tables translate it (the guest's view). */
static uint8_t *seen(struct aspace *as, uint64_t gva, uint64_t *flags)
{
	int64_t gpa = pt_walk(mem.host, as->cr3, gva, flags);

	ck_assert_msg(gpa >= 0, "window %d: %#llx not mapped", as->win, (unsigned long long)gva);
	return mem.host + gpa;
}

/* The tables of every space say what the bookkeeping says: each block maps the window
 * that holds its data, that window's space maps it as its own, the reader counts are
 * right, only an unshared own block is writable, and one never backed is not mapped;
 * the budget's count is the backed blocks'. */
static void check_all(void)
{
	for (int w = 0; w < NWIN; w++) {
		struct aspace *as = set.as[w];

		if (!as)
			continue;
		for (uint32_t b = LAYOUT_USER_BASE / HUGE_SIZE; b < set.blocks; b++) {
			int home = as->src[b] == ASPACE_OWN ? w : as->src[b];
			int readers = 0;
			uint64_t flags;
			int64_t gpa = pt_walk(mem.host, as->cr3, BLK(b), &flags);

			for (int r = 0; r < NWIN; r++)
				readers += set.as[r] && r != w && set.as[r]->src[b] == w;
			if (home == w && !readers && !set.held[w * set.blocks + b] &&
			    !set.backed[w * set.blocks + b]) {
				ck_assert_msg(gpa == -1, "window %d block %u: never backed, but mapped",
					      w, b);
				continue;
			}
			ck_assert_msg(set.as[home] && set.as[home]->src[b] == ASPACE_OWN,
				      "window %d block %u reads window %d, which does not own it", w,
				      b, home);
			ck_assert_msg(gpa == (int64_t)(home * WIN + BLK(b)),
				      "window %d block %u maps %#llx, not window %d's", w, b,
				      (unsigned long long)gpa, home);
			ck_assert_uint_eq(set.readers[w * set.blocks + b], readers);
			ck_assert_msg(!!(flags & PTE_RW) ==
					      (home == w && !readers && !set.held[w * set.blocks + b]),
				      "window %d block %u: writable %d, own %d, readers %d", w, b,
				      !!(flags & PTE_RW), home == w, readers);
		}
	}
	uint32_t backed = 0;

	for (size_t i = 0; i < (size_t)set.n * set.blocks; i++)
		backed += set.backed[i];
	ck_assert_uint_eq(backed, set.n_backed);
}

/* Window 0's tables are byte for byte those of the one-process VM (pt_build), and
 * every process maps the one system and stub area, with the same rights. */
START_TEST(test_window0_is_identity)
{
	static uint8_t ref[LAYOUT_SYS_END];
	struct aspace *a, *b;
	uint64_t cr3, f0, f1;

	ck_assert_int_eq(pt_build(ref, WIN, &cr3), 0);
	ck_assert_int_eq(aspace_create(&set, &a), 0);
	ck_assert_int_eq(a->win, 0);
	ck_assert_uint_eq(a->cr3, cr3);
	ck_assert_msg(!memcmp(mem.host + LAYOUT_PGTABLE, ref + LAYOUT_PGTABLE, 4 * PAGE_SIZE),
		      "window 0's tables differ from pt_build's");
	ck_assert_int_eq(aspace_create(&set, &b), 0);
	ck_assert_int_eq(b->win, 1);
	ck_assert_uint_eq(b->cr3, WIN + LAYOUT_PGTABLE);
	ck_assert_int_eq(pt_walk(mem.host, b->cr3, LAYOUT_STUBS, &f1), (int64_t)LAYOUT_STUBS);
	ck_assert_int_eq(pt_walk(mem.host, a->cr3, LAYOUT_STUBS, &f0), (int64_t)LAYOUT_STUBS);
	ck_assert_uint_eq(f0, f1);
	ck_assert_int_eq(pt_walk(mem.host, b->cr3, LAYOUT_GDT, &f1), (int64_t)LAYOUT_GDT);
	ck_assert_msg(!(f1 & PTE_US), "the system area must stay supervisor-only");
	ck_assert_int_eq(pt_walk(mem.host, b->cr3, LAYOUT_USER_BASE, &f1),
			 (int64_t)(WIN + LAYOUT_USER_BASE));
	ck_assert_int_eq(pt_walk(mem.host, b->cr3, WIN, &f1), -1);
	check_all();
}
END_TEST

/* After a fork both sides read the same bytes without a copy; a write fault by the
 * child copies its block alone, and from then on neither side sees the other's writes. */
START_TEST(test_fork_child_writes)
{
	struct aspace *p, *c;
	uint64_t flush = 0, f;

	ck_assert_int_eq(aspace_create(&set, &p), 0);
	memset(mem.host + BLK(3), 'p', HUGE_SIZE);
	memset(mem.host + BLK(4), 'q', HUGE_SIZE);
	ck_assert_int_eq(aspace_fork(p, NULL, &c, &flush), 0);
	ck_assert_uint_eq(flush, 1ULL << p->win); /* its entries became read-only */
	check_all();
	ck_assert_ptr_eq(seen(c, BLK(3) + 5, &f), mem.host + BLK(3) + 5); /* no copy */
	ck_assert_msg(!(f & PTE_RW), "a shared block must be read-only in the child");
	seen(p, BLK(3), &f);
	ck_assert_msg(!(f & PTE_RW), "a shared block must be read-only in the parent");

	flush = 0;
	ck_assert_int_eq(aspace_write_fault(c, BLK(3) + 100, &flush), 0);
	/* both moved: the child to its copy, the parent to a writable entry */
	ck_assert_uint_eq(flush, (1ULL << c->win) | (1ULL << p->win));
	check_all();
	ck_assert_uint_eq(*seen(c, BLK(3) + 7, &f), 'p');
	ck_assert_msg(f & PTE_RW, "the child's own copy must be writable");
	seen(p, BLK(3), &f);
	ck_assert_msg(f & PTE_RW, "nobody reads the parent's block any more: writable again");
	*seen(c, BLK(3) + 7, &f) = 'c';
	ck_assert_uint_eq(mem.host[BLK(3) + 7], 'p');
	mem.host[BLK(3) + 8] = 'P';
	ck_assert_uint_eq(*seen(c, BLK(3) + 8, &f), 'p');
	ck_assert_ptr_eq(seen(c, BLK(4), &f), mem.host + BLK(4)); /* still shared */
}
END_TEST

/* A parent that writes a block its child reads gives the child a copy first: the child
 * keeps the bytes of the fork's instant. */
START_TEST(test_fork_parent_writes)
{
	struct aspace *p, *c;
	uint64_t flush = 0, f;

	ck_assert_int_eq(aspace_create(&set, &p), 0);
	memset(mem.host + BLK(5), 'x', HUGE_SIZE);
	ck_assert_int_eq(aspace_fork(p, NULL, &c, &flush), 0);
	flush = 0;
	ck_assert_int_eq(aspace_write_fault(p, BLK(5), &flush), 0);
	ck_assert_uint_eq(flush, (1ULL << c->win) | (1ULL << p->win));
	check_all();
	mem.host[BLK(5) + 1] = 'y';
	ck_assert_uint_eq(*seen(c, BLK(5) + 1, &f), 'x');
	ck_assert_ptr_eq(seen(c, BLK(5), &f), mem.host + c->win * WIN + BLK(5));
	seen(p, BLK(5), &f);
	ck_assert_msg(f & PTE_RW, "the parent's block must be writable after its fault");
}
END_TEST

/* Only the blocks a fork is told are in use are shared; the rest are the child's own
 * and zero. */
START_TEST(test_fork_used_only)
{
	struct aspace *p, *c;
	uint64_t used[1] = { 1ULL << 2 }, flush = 0, f;

	ck_assert_int_eq(aspace_create(&set, &p), 0);
	memset(mem.host + BLK(2), 'u', HUGE_SIZE);
	memset(mem.host + BLK(6), 'n', HUGE_SIZE);
	ck_assert_int_eq(aspace_fork(p, used, &c, &flush), 0);
	check_all();
	ck_assert_uint_eq(*seen(c, BLK(2), &f), 'u');
	ck_assert_int_eq(pt_walk(mem.host, c->cr3, BLK(6), &f), -1); /* own, not backed yet */
	ck_assert_int_eq(aspace_write_fault(c, BLK(6) + 9, &flush), 0); /* its first touch */
	check_all();
	ck_assert_uint_eq(*seen(c, BLK(6), &f), 0);
	ck_assert_msg(f & PTE_RW, "a block not in use is the child's own, writable");
	seen(p, BLK(6), &f);
	ck_assert_msg(f & PTE_RW, "the parent's unshared block must stay writable");
}
END_TEST

/* Blocks a fork is told to copy (they hold shared mappings: vmm/linux/shm.c) are the
 * child's own at once, with the parent's bytes, and both sides stay writable. And a
 * window mapped over by a file (gmem_alias) is private zero memory again after its
 * space ends. */
START_TEST(test_fork_copies)
{
	uint64_t used[1] = { (1ULL << 2) | (1ULL << 3) }, copy[1] = { 1ULL << 3 }, flush = 0, f;
	struct aspace *p, *c;
	int fd = memfd_create("aspace-test", MFD_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, HUGE_SIZE), 0);
	ck_assert_int_eq(aspace_create(&set, &p), 0);
	memset(mem.host + BLK(2), 'u', HUGE_SIZE);
	memset(mem.host + BLK(3), 's', HUGE_SIZE);
	ck_assert_int_eq(aspace_fork_copy(p, used, copy, &c, &flush), 0);
	check_all();
	ck_assert_int_eq(c->src[3], ASPACE_OWN);
	ck_assert_uint_eq(*seen(c, BLK(3) + 5, &f), 's');
	ck_assert_msg(f & PTE_RW, "a copied block is the child's own, writable");
	seen(p, BLK(3), &f);
	ck_assert_msg(f & PTE_RW, "the parent's copied block must stay writable");
	ck_assert_int_eq(c->src[2], 0); /* the other still shared */
	ck_assert_int_eq(gmem_alias(&mem, c->win * WIN + BLK(4), HUGE_SIZE, fd, 0), 0);
	mem.host[c->win * WIN + BLK(4)] = 'f';
	ck_assert_int_eq(pread(fd, &f, 1, 0), 1);
	ck_assert_uint_eq(f & 0xff, 'f');
	aspace_destroy(c, &flush);
	ck_assert_uint_eq(mem.host[WIN + BLK(4)], 0);
	ck_assert_int_eq(gmem_alias(&mem, BLK(4), HUGE_SIZE + 1, fd, 0), -EINVAL);
	close(fd);
	/* A file the host will not map: refused, the range still memory, zero. */
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_lt(gmem_alias(&mem, BLK(5), HUGE_SIZE, fd, 0), 0);
	ck_assert_uint_eq(mem.host[BLK(5) + 7], 0);
	mem.host[BLK(5) + 7] = 3;
	ck_assert_uint_eq(mem.host[BLK(5) + 7], 3);
	close(fd);
}
END_TEST

/* What a snapshot's hold saved: the first byte of each block, by window. */
static uint8_t hold_saw[NWIN][WIN / HUGE_SIZE];
static int hold_copies;

static void hold_copy(void *ctx, int w, uint32_t b)
{
	(void)ctx;
	hold_saw[w][b] = mem.host[w * WIN + BLK(b)];
	hold_copies++;
}

/* A snapshot's hold on a child's own blocks: read-only until saved; a write fault
 * saves the block as it was first, the monitor's own() too, and the end saves the
 * rest and makes every block writable again. Window 0 is never held. */
START_TEST(test_hold)
{
	uint64_t bits0[1] = { ~0ULL }, bits1[1] = { ~0ULL }, flush = 0, f;
	uint64_t *bits[NWIN] = { bits0, bits1 };
	struct aspace *p, *c;

	memset(hold_saw, 0, sizeof(hold_saw));
	hold_copies = 0;
	ck_assert_int_eq(aspace_create(&set, &p), 0);
	ck_assert_int_eq(aspace_fork(p, NULL, &c, &flush), 0);
	ck_assert_int_eq(aspace_write_fault(c, BLK(3), &flush), 0); /* c owns 3 now */
	mem.host[WIN + BLK(3)] = 'a';
	ck_assert_int_eq(aspace_own(c, BLK(4), 1, &flush), 0);
	mem.host[WIN + BLK(4)] = 'b';
	ck_assert_int_eq(aspace_hold(&set, bits, hold_copy, NULL, &flush), 0);
	ck_assert_int_eq(aspace_hold(&set, bits, hold_copy, NULL, &flush), -EBUSY);
	check_all();
	seen(c, BLK(3), &f);
	ck_assert_msg(!(f & PTE_RW), "a held block must be read-only");
	seen(p, BLK(2), &f);
	ck_assert_msg(!(f & PTE_RW), "the parent's blocks are still shared with the child");
	ck_assert_uint_eq(set.n_held, 2); /* c's own blocks; window 0 never */
	ck_assert_int_eq(aspace_write_fault(c, BLK(3), &flush), 0);
	ck_assert_int_eq(hold_copies, 1);
	ck_assert_uint_eq(hold_saw[1][3], 'a');
	mem.host[WIN + BLK(3)] = 'z';
	check_all();
	aspace_hold_end(&set, &flush);
	ck_assert_int_eq(hold_copies, 2);
	ck_assert_uint_eq(hold_saw[1][4], 'b');
	ck_assert_uint_eq(hold_saw[1][3], 'a');
	seen(c, BLK(4), &f);
	ck_assert_msg(f & PTE_RW, "a block is writable again after the hold");
	check_all();
	/* An exit saves what is still held before its window goes. */
	ck_assert_int_eq(aspace_hold(&set, bits, hold_copy, NULL, &flush), 0);
	aspace_destroy(c, &flush);
	ck_assert_int_eq(hold_copies, 4);
	ck_assert_uint_eq(hold_saw[1][3], 'z');
	aspace_hold_end(&set, &flush);
	check_all();
}
END_TEST

/* A space that ends hands its shared blocks on: the first reader takes a copy, the
 * second reads that one, and both still see the bytes of the fork. */
START_TEST(test_destroy_hands_over)
{
	struct aspace *p, *c1, *c2;
	uint64_t flush = 0, f;
	int w1;

	ck_assert_int_eq(aspace_create(&set, &p), 0);
	memset(mem.host + BLK(3), 'h', HUGE_SIZE);
	ck_assert_int_eq(aspace_fork(p, NULL, &c1, &flush), 0);
	ck_assert_int_eq(aspace_fork(p, NULL, &c2, &flush), 0);
	w1 = c1->win;
	flush = 0;
	aspace_destroy(p, &flush);
	ck_assert_uint_eq(flush, (1ULL << c1->win) | (1ULL << c2->win));
	check_all();
	ck_assert_uint_eq(*seen(c1, BLK(3) + 9, &f), 'h');
	ck_assert_uint_eq(*seen(c2, BLK(3) + 9, &f), 'h');
	ck_assert_ptr_eq(seen(c2, BLK(3), &f), mem.host + w1 * WIN + BLK(3));
	ck_assert_uint_eq(mem.host[BLK(3)], 0); /* the ended window reads as zero */
	/* its window is free again, and the next space gets it */
	ck_assert_int_eq(aspace_create(&set, &p), 0);
	ck_assert_int_eq(p->win, 0);
	check_all();
}
END_TEST

/* exec's reset: the space starts empty and writable, its child keeps the old bytes. */
START_TEST(test_reset)
{
	struct aspace *p, *c;
	uint64_t flush = 0, f;

	ck_assert_int_eq(aspace_create(&set, &p), 0);
	memset(mem.host + BLK(7), 'r', HUGE_SIZE);
	ck_assert_int_eq(aspace_fork(p, NULL, &c, &flush), 0);
	flush = 0;
	ck_assert_int_eq(aspace_reset(c, &flush), 0);
	check_all();
	ck_assert_int_eq(pt_walk(mem.host, c->cr3, BLK(7), &f), -1); /* lazy: empty */
	ck_assert_int_eq(aspace_write_fault(c, BLK(7), &flush), 0);
	ck_assert_uint_eq(*seen(c, BLK(7), &f), 0);
	ck_assert_msg(f & PTE_RW, "after exec every block is the space's own");
	seen(p, BLK(7), &f);
	ck_assert_msg(f & PTE_RW, "the parent is read by nobody after the child's exec");
	ck_assert_uint_eq(*seen(p, BLK(7), &f), 'r');
	*seen(c, BLK(7), &f) = 'c';
	ck_assert_int_eq(aspace_fork(c, NULL, &p, &flush), 0);
	flush = 0;
	ck_assert_int_eq(aspace_reset(c, &flush), 0); /* a reader of it keeps the data */
	check_all();
	ck_assert_uint_eq(*seen(p, BLK(7), &f), 'c');
}
END_TEST

/* The monitor's in-place access: every block of a range becomes the space's own, so
 * the range is contiguous at its window; reads go where the data is, without a copy. */
START_TEST(test_own_range)
{
	struct aspace *p, *c;
	uint64_t flush = 0, f;

	ck_assert_int_eq(aspace_create(&set, &p), 0);
	memset(mem.host + BLK(2), 'a', 3 * HUGE_SIZE);
	ck_assert_int_eq(aspace_fork(p, NULL, &c, &flush), 0);
	ck_assert_int_eq(aspace_gpa(c, BLK(3) + 1), (int64_t)(BLK(3) + 1));
	ck_assert_int_eq(aspace_own(c, BLK(2) + HUGE_SIZE - 1, HUGE_SIZE + 2, &flush), 0);
	check_all();
	ck_assert_int_eq(aspace_gpa(c, BLK(3) + 1), (int64_t)(c->win * WIN + BLK(3) + 1));
	for (int b = 2; b <= 4; b++)
		ck_assert_uint_eq(mem.host[c->win * WIN + BLK(b) + 17], 'a');
	ck_assert_ptr_eq(seen(c, BLK(4), &f), mem.host + c->win * WIN + BLK(4));
	ck_assert_ptr_eq(seen(c, BLK(5), &f), mem.host + BLK(5)); /* outside: still shared */
}
END_TEST

/* A space that owns every block reuses its window's first tables, unchanged since
 * (written once): processes that come and go never run the pool dry. */
START_TEST(test_canonical_tables_reused)
{
	struct aspace *a, *b;
	uint32_t used;
	uint64_t flush = 0;

	ck_assert_int_eq(aspace_create(&set, &a), 0);
	ck_assert_int_eq(aspace_create(&set, &b), 0);
	used = set.next[b->win];
	for (int i = 0; i < 500; i++) {
		aspace_destroy(b, &flush);
		ck_assert_int_eq(aspace_create(&set, &b), 0);
		ck_assert_uint_eq(b->cr3, b->win * WIN + LAYOUT_PGTABLE);
	}
	ck_assert_uint_eq(set.next[b->win], used);
	check_all();
	ck_assert_int_eq(aspace_write_fault(b, BLK(3), &flush), 0); /* nothing to change */
	ck_assert_uint_eq(b->cr3, b->win * WIN + LAYOUT_PGTABLE);
}
END_TEST

/* Addresses outside user memory are refused, and windows run out with -EAGAIN. */
START_TEST(test_limits)
{
	struct aspace *as[NWIN + 1];
	uint64_t flush = 0;

	for (int i = 0; i < NWIN; i++)
		ck_assert_int_eq(aspace_create(&set, &as[i]), 0);
	ck_assert_int_eq(aspace_create(&set, &as[NWIN]), -EAGAIN);
	ck_assert_int_eq(aspace_fork(as[0], NULL, &as[NWIN], &flush), -EAGAIN);
	check_all(); /* a failed fork shared nothing */
	ck_assert_int_eq(aspace_write_fault(as[1], LAYOUT_STUBS, &flush), -EFAULT);
	ck_assert_int_eq(aspace_write_fault(as[1], WIN, &flush), -EFAULT);
	ck_assert_int_eq(aspace_own(as[1], WIN - 4, 8, &flush), -EFAULT);
	ck_assert_int_eq(aspace_own(as[1], UINT64_MAX - 4, 8, &flush), -EFAULT);
	ck_assert_int_eq(aspace_gpa(as[1], LAYOUT_GDT), -1);
	ck_assert_int_eq(aspace_set_init(&(struct aspace_set){ 0 }, &mem, WIN, NWIN + 1), -EINVAL);
}
END_TEST

static uint64_t flushed;

static void note_flush(void *ctx, uint64_t mask)
{
	(void)ctx;
	flushed |= mask;
}

/* A process's view of memory (gmem_view): reads of a shared block go where its bytes
 * are, with no copy; an in-place pointer, a copy-out or a discard makes the blocks the
 * view's own first, so the other side keeps its bytes; what moved is flushed. */
START_TEST(test_view)
{
	struct aspace *p, *c;
	struct gmem *pv, *cv;
	uint64_t flush = 0;
	char str[64], buf[8];
	uint8_t *w;

	set.flush = note_flush;
	flushed = 0;
	ck_assert_int_eq(aspace_create(&set, &p), 0);
	pv = aspace_view(p);
	memset(mem.host + BLK(2), 'v', 3 * HUGE_SIZE);
	strcpy((char *)mem.host + BLK(3) - 3, "ab|cd"); /* a string across two blocks */
	ck_assert_int_eq(aspace_fork(p, NULL, &c, &flush), 0);
	/* The parent's blocks turned read-only: its vCPUs leave its old tables. */
	ck_assert_uint_eq(flushed & (1ULL << p->win), 1ULL << p->win);
	flushed = 0;
	cv = aspace_view(c);
	ck_assert_int_eq(gmem_copy_str(cv, str, BLK(3) - 3, sizeof(str), NULL), 0);
	ck_assert_str_eq(str, "ab|cd");
	ck_assert_int_eq(gmem_copy_in(cv, buf, BLK(4), 8), 0);
	ck_assert_int_eq(buf[7], 'v');
	ck_assert_uint_eq(mem.host[c->win * WIN + BLK(4)], 0); /* read without a copy */
	ck_assert_uint_eq(flushed, 0);

	w = gmem_user_ptr(cv, BLK(4) + 10, 4);
	ck_assert_ptr_eq(w, mem.host + c->win * WIN + BLK(4) + 10);
	ck_assert_uint_eq(flushed, (1ULL << c->win) | (1ULL << p->win));
	memcpy(w, "CHLD", 4);
	ck_assert_uint_eq(mem.host[BLK(4) + 10], 'v');
	check_all();

	flushed = 0;
	ck_assert_int_eq(gmem_copy_out(pv, BLK(2) + 1, "P", 1), 0); /* the child reads it */
	ck_assert_uint_eq(flushed, (1ULL << c->win) | (1ULL << p->win));
	ck_assert_int_eq(gmem_copy_in(cv, buf, BLK(2) + 1, 1), 0);
	ck_assert_int_eq(buf[0], 'v');
	check_all();

	ck_assert_int_eq(gmem_discard(cv, BLK(3), HUGE_SIZE), 0);
	ck_assert_int_eq(gmem_copy_in(cv, buf, BLK(3) + 5, 1), 0);
	ck_assert_int_eq(buf[0], 0);
	ck_assert_uint_eq(mem.host[BLK(3) + 5], 'v');
	check_all();
	ck_assert_ptr_null(gmem_user_ptr(cv, WIN - 2, 4)); /* past its window */
	ck_assert_int_eq(gmem_copy_in(cv, buf, LAYOUT_GDT, 1), -EFAULT);
}
END_TEST

/* A space that shares nothing takes the fast path: its view is the identity on its
 * window, and nothing is looked up. */
START_TEST(test_view_alone)
{
	struct aspace *a, *b, *c;
	struct gmem *bv;
	uint64_t flush = 0;

	ck_assert_int_eq(aspace_create(&set, &a), 0);
	ck_assert_int_eq(aspace_create(&set, &b), 0);
	bv = aspace_view(b);
	ck_assert_uint_eq(b->n_shared, 0);
	ck_assert_ptr_eq(gmem_user_ptr(bv, BLK(5), 8), mem.host + WIN + BLK(5));
	ck_assert_int_eq(aspace_fork(a, NULL, &c, &flush), 0);
	ck_assert_uint_eq(a->n_shared, set.blocks - LAYOUT_USER_BASE / HUGE_SIZE);
	aspace_destroy(c, &flush);
	ck_assert_uint_eq(a->n_shared, 0);
}
END_TEST

static int recycles;

static void note_recycle(void *ctx)
{
	(void)ctx;
	recycles++;
}

/* Tables are written once: a change writes fresh ones and moves CR3, leaving every byte
 * of the tables in use before as it was (a vCPU's stale view of them stays true to
 * them). When a window's pool of unused pages runs out, the VM is asked to forget every
 * translation, and every space is written afresh from its pool's start. */
START_TEST(test_tables_written_once)
{
	static uint8_t before[LAYOUT_SYS_END];
	struct aspace *p, *c;
	uint64_t flush = 0, cr3;
	int faults = 0;

	set.recycle = note_recycle;
	recycles = 0;
	ck_assert_int_eq(aspace_create(&set, &p), 0);
	ck_assert_int_eq(aspace_fork(p, NULL, &c, &flush), 0);
	memcpy(before, mem.host + c->win * WIN, LAYOUT_SYS_END);
	cr3 = c->cr3;
	ck_assert_int_eq(aspace_write_fault(c, BLK(2), &flush), 0);
	ck_assert_uint_ne(c->cr3, cr3);
	ck_assert_msg(!memcmp(before + LAYOUT_PGTABLE, mem.host + c->win * WIN + LAYOUT_PGTABLE,
			      (size_t)(c->cr3 - c->win * WIN - LAYOUT_PGTABLE)),
		      "a table in use was written in place");
	/* each of these moves both spaces: they run the pools dry, more than once */
	for (int round = 0; round < 200; round++) {
		uint64_t b = BLK(2 + round % 6);

		ck_assert_int_eq(aspace_reset(c, &flush), 0);
		aspace_destroy(c, &flush);
		ck_assert_int_eq(aspace_fork(p, NULL, &c, &flush), 0);
		ck_assert_int_eq(aspace_write_fault(round % 2 ? p : c, b, &flush), 0);
		faults++;
		check_all();
	}
	ck_assert_msg(recycles >= 1, "%d changes and the pools never ran out", faults);
	ck_assert_uint_lt(c->cr3 - c->win * WIN, LAYOUT_SYS_END);
}
END_TEST

#define USER_BLOCKS (WIN / HUGE_SIZE - LAYOUT_USER_BASE / HUGE_SIZE)

/* The budget (--mem-total): an eager space is charged all its blocks at once; a lazy
 * one a block at its first touch, and a copy as it is made, sharing costs nothing;
 * past the budget a change fails with -ENOMEM and nothing moves, for the monitor's
 * writes too. An owner's write never fails for its readers' sake: a reader whose copy
 * does not fit loses the block, and its touch fails until it drops it. An ending
 * space gives its blocks back. */
START_TEST(test_budget)
{
	uint64_t flush = 0, used[1] = { 1ULL << 2 }, used3[1] = { 1ULL << 3 }, f;
	struct aspace *p, *c, *d;

	aspace_set_budget(&set, USER_BLOCKS + 2);
	ck_assert_int_eq(aspace_create(&set, &p), 0);
	ck_assert_uint_eq(aspace_set_charged(&set), USER_BLOCKS);
	memset(mem.host + BLK(2), 'u', 2 * HUGE_SIZE);
	ck_assert_int_eq(aspace_fork(p, used, &c, &flush), 0);
	ck_assert_uint_eq(aspace_set_charged(&set), USER_BLOCKS);
	ck_assert_int_eq(aspace_write_fault(c, BLK(4) + 1, &flush), 0); /* first touch */
	ck_assert_int_eq(aspace_write_fault(c, BLK(2) + 1, &flush), 0); /* its copy */
	ck_assert_uint_eq(aspace_set_charged(&set), USER_BLOCKS + 2);
	ck_assert_uint_eq(*seen(c, BLK(2), &f), 'u');
	check_all();
	ck_assert_int_eq(aspace_write_fault(c, BLK(5), &flush), -ENOMEM);
	ck_assert_int_eq(aspace_own(c, BLK(5), 2 * HUGE_SIZE, &flush), -ENOMEM);
	ck_assert_ptr_null(gmem_user_ptr(aspace_view(c), BLK(6) + 8, 8));
	ck_assert_int_eq(pt_walk(mem.host, c->cr3, BLK(5), &f), -1);
	ck_assert_int_eq(aspace_own(c, BLK(4), HUGE_SIZE, &flush), 0); /* backed: free */
	ck_assert_int_eq(aspace_fork(p, used3, &d, &flush), 0);
	ck_assert_int_eq(aspace_write_fault(p, BLK(3), &flush), 0); /* no room for d's copy */
	ck_assert_msg(d->src[3] == ASPACE_OWN && d->lost[3], "the reader lost the block");
	ck_assert_int_eq(pt_walk(mem.host, d->cr3, BLK(3), &f), -1);
	ck_assert_int_eq(aspace_write_fault(d, BLK(3), &flush), -ENOMEM);
	ck_assert_uint_eq(aspace_set_charged(&set), USER_BLOCKS + 2);
	check_all();
	ck_assert_int_eq(aspace_drop(d, BLK(3), HUGE_SIZE, &flush), 0); /* munmap: no loss */
	aspace_destroy(c, &flush);
	ck_assert_uint_eq(aspace_set_charged(&set), USER_BLOCKS);
	ck_assert_int_eq(aspace_write_fault(d, BLK(3), &flush), 0);
	ck_assert_uint_eq(*seen(d, BLK(3), &f), 0);
	ck_assert_int_eq(aspace_reset(d, &flush), 0);
	ck_assert_uint_eq(aspace_set_charged(&set), USER_BLOCKS);
	ck_assert_int_eq(aspace_create(&set, &c), -ENOMEM); /* eager: a whole window */
	ck_assert_int_eq(aspace_create_lazy(&set, &c), 0); /* a vfork child's exec */
	ck_assert_uint_eq(aspace_set_charged(&set), USER_BLOCKS);
	ck_assert_int_eq(pt_walk(mem.host, c->cr3, BLK(2), &f), -1);
	ck_assert_int_eq(aspace_write_fault(c, BLK(2), &flush), 0);
	ck_assert_uint_eq(aspace_set_charged(&set), USER_BLOCKS + 1);
	check_all();
}
END_TEST

/* After a restore into @r beside the first space @p: both tables written, @r's block 3
 * its own and writable (@why if not), the bookkeeping agreeing. */
static void expect_restored_own(struct aspace *p, struct aspace *r, const char *why)
{
	uint64_t f;

	aspace_tables(p);
	aspace_tables(r);
	seen(r, BLK(3), &f);
	ck_assert_msg(f & PTE_RW, "%s", why);
	check_all();
}

/* A fork whose copies would pass the budget fails before it takes a window; a
 * restore's blocks are charged as they are filled, and only a space's user blocks. */
START_TEST(test_budget_fork_restore)
{
	uint64_t flush = 0, used[1] = { (1ULL << 2) | (1ULL << 3) };
	uint64_t copy[1] = { 1ULL << 3 };
	struct aspace *p, *c, *r;

	aspace_set_budget(&set, USER_BLOCKS + 1);
	ck_assert_int_eq(aspace_create(&set, &p), 0);
	ck_assert_int_eq(aspace_fork_copy(p, used, used, &c, &flush), -ENOMEM);
	ck_assert_ptr_null(set.as[1]);
	ck_assert_int_eq(aspace_fork_copy(p, used, copy, &c, &flush), 0);
	ck_assert_uint_eq(aspace_set_charged(&set), USER_BLOCKS + 1);
	ck_assert_int_eq(aspace_create_at(&set, 2, &r), 0);
	ck_assert_int_eq(aspace_restore_fill(&set, 2, 3), -ENOMEM);
	ck_assert_int_eq(aspace_restore_fill(&set, 3, 3), -EINVAL);
	ck_assert_int_eq(aspace_restore_fill(&set, 2, 0), -EINVAL);
	aspace_destroy(c, &flush);
	ck_assert_int_eq(aspace_restore_fill(&set, 2, 3), 0);
	ck_assert_int_eq(aspace_restore_read(r, 4, 0), 0);
	expect_restored_own(p, r, "a restored block is the space's own, writable");
}
END_TEST

/* A migration's records are charged as they come, before their spaces exist: the
 * first window's whole charge stays free for it, a block sent twice, one of the first
 * window and one outside a window are refused; the space made later maps them. */
START_TEST(test_restore_back)
{
	struct aspace *p, *r;

	aspace_set_budget(&set, USER_BLOCKS + 2);
	ck_assert_int_eq(aspace_restore_back(&set, 2, 3), 0);
	ck_assert_int_eq(aspace_restore_back(&set, 2, 3), -EEXIST);
	ck_assert_int_eq(aspace_restore_back(&set, 0, 3), -EINVAL);
	ck_assert_int_eq(aspace_restore_back(&set, NWIN, 3), -EINVAL);
	ck_assert_int_eq(aspace_restore_back(&set, 2, 1), -EINVAL);
	ck_assert_int_eq(aspace_restore_back(&set, 3, 4), 0);
	ck_assert_int_eq(aspace_restore_back(&set, 3, 5), -ENOMEM); /* the RAM's share */
	ck_assert_uint_eq(aspace_set_charged(&set), 2);
	ck_assert_int_eq(aspace_create(&set, &p), 0);
	ck_assert_uint_eq(aspace_set_charged(&set), USER_BLOCKS + 2);
	ck_assert_int_eq(aspace_create_at(&set, 2, &r), 0);
	ck_assert_int_eq(aspace_restore_back(&set, 2, 4), -EINVAL); /* its space exists */
	ck_assert_int_eq(aspace_restore_fill(&set, 2, 3), 0);  /* charged already */
	ck_assert_uint_eq(aspace_set_charged(&set), USER_BLOCKS + 2);
	expect_restored_own(p, r, "a block that came ahead is the space's own, writable");
}
END_TEST

/* A discard (munmap, exec) charges nothing: a child's block read from its parent that
 * it drops whole stops being read, with no copy; a block never backed stays so; a
 * block dropped in part is copied first (its other bytes stay). */
START_TEST(test_drop)
{
	uint64_t flush = 0, used[1] = { (1ULL << 2) | (1ULL << 3) }, f;
	struct aspace *p, *c;

	aspace_set_budget(&set, USER_BLOCKS + 2);
	ck_assert_int_eq(aspace_create(&set, &p), 0);
	memset(mem.host + BLK(2), 'd', 2 * HUGE_SIZE);
	ck_assert_int_eq(aspace_fork(p, used, &c, &flush), 0);
	ck_assert_int_eq(aspace_drop(c, BLK(2), HUGE_SIZE, &flush), 0);
	ck_assert_int_eq(c->src[2], ASPACE_OWN);
	ck_assert_int_eq(pt_walk(mem.host, c->cr3, BLK(2), &f), -1);
	ck_assert_uint_eq(aspace_set_charged(&set), USER_BLOCKS);
	ck_assert_int_eq(aspace_drop(c, BLK(3) + 4096, 4096, &flush), 0);
	ck_assert_uint_eq(*seen(c, BLK(3) + 5, &f), 'd');
	ck_assert_int_eq(aspace_drop(c, BLK(4) + 4096, 2 * HUGE_SIZE, &flush), 0);
	ck_assert_int_eq(pt_walk(mem.host, c->cr3, BLK(5), &f), -1);
	ck_assert_uint_eq(aspace_set_charged(&set), USER_BLOCKS + 1);
	check_all();
	ck_assert_uint_eq(*seen(p, BLK(2), &f), 'd');
	ck_assert_msg(f & PTE_RW, "nobody reads the parent's block after the drop");
}
END_TEST

Suite *aspace_suite(void)
{
	Suite *s = suite_create("aspace");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_window0_is_identity);
	tcase_add_test(tc, test_fork_child_writes);
	tcase_add_test(tc, test_fork_parent_writes);
	tcase_add_test(tc, test_fork_used_only);
	tcase_add_test(tc, test_fork_copies);
	tcase_add_test(tc, test_hold);
	tcase_add_test(tc, test_destroy_hands_over);
	tcase_add_test(tc, test_reset);
	tcase_add_test(tc, test_own_range);
	tcase_add_test(tc, test_limits);
	tcase_add_test(tc, test_canonical_tables_reused);
	tcase_add_test(tc, test_view);
	tcase_add_test(tc, test_view_alone);
	tcase_add_test(tc, test_tables_written_once);
	tcase_add_test(tc, test_budget);
	tcase_add_test(tc, test_budget_fork_restore);
	tcase_add_test(tc, test_restore_back);
	tcase_add_test(tc, test_drop);
	suite_add_tcase(s, tc);
	return s;
}
