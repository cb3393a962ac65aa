/*
 * test_gmem.c - the checked translation of guest addresses, at the edges of RAM.
 */
#include "suites.h"
#include "../../mmu/gmem.h"
#include "../../mmu/layout.h"
#include "../../mmu/resident.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#define RAM (16ULL << 20)

static struct gmem mem;

static void setup(void)
{
	ck_assert_int_eq(gmem_map(&mem, RAM), 0);
}

static void teardown(void)
{
	gmem_unmap(&mem);
}

/* Guest RAM is 2 MiB aligned on the host and sized exactly. */
START_TEST(test_map_aligned)
{
	ck_assert_uint_eq((uintptr_t)mem.host % (2 << 20), 0);
	ck_assert_uint_eq(mem.size, RAM);
}
END_TEST

/* Sizes that are zero, not 2 MiB multiples, too small or too large are refused. */
START_TEST(test_map_bad_sizes)
{
	struct gmem m;

	ck_assert_int_eq(gmem_map(&m, 0), -EINVAL);
	ck_assert_int_eq(gmem_map(&m, RAM + 4096), -EINVAL);
	ck_assert_int_eq(gmem_map(&m, 2 << 20), -EINVAL);
	ck_assert_int_eq(gmem_map(&m, LAYOUT_MAX_RAM + (2 << 20)), -EINVAL);
}
END_TEST

/* User pointers: the first user byte and the last byte of RAM are fine; the system
 * and stub areas, one byte past the end, and wrapping lengths are not. */
START_TEST(test_user_ptr_edges)
{
	ck_assert_ptr_eq(gmem_user_ptr(&mem, LAYOUT_USER_BASE, 1), mem.host + LAYOUT_USER_BASE);
	ck_assert_ptr_null(gmem_user_ptr(&mem, LAYOUT_USER_BASE - 1, 1));
	ck_assert_ptr_null(gmem_user_ptr(&mem, 0, 1));
	ck_assert_ptr_null(gmem_user_ptr(&mem, LAYOUT_STUBS, 8));
	ck_assert_ptr_nonnull(gmem_user_ptr(&mem, RAM - 1, 1));
	ck_assert_ptr_nonnull(gmem_user_ptr(&mem, RAM - 4096, 4096));
	ck_assert_ptr_null(gmem_user_ptr(&mem, RAM - 4096, 4097));
	ck_assert_ptr_null(gmem_user_ptr(&mem, RAM, 1));
	ck_assert_ptr_null(gmem_user_ptr(&mem, LAYOUT_USER_BASE, UINT64_MAX));
	ck_assert_ptr_null(gmem_user_ptr(&mem, UINT64_MAX, 2));
	ck_assert_ptr_nonnull(gmem_user_ptr(&mem, RAM, 0));
}
END_TEST

/* Strings are copied whole with their length, and must end inside RAM within the
 * limit: too long is ENAMETOOLONG, off the end of RAM or outside user RAM EFAULT. */
START_TEST(test_copy_str)
{
	char buf[4096];
	size_t len = 0;

	memcpy(mem.host + LAYOUT_USER_BASE, "hello", 6);
	ck_assert_int_eq(gmem_copy_str(&mem, buf, LAYOUT_USER_BASE, 64, &len), 0);
	ck_assert_str_eq(buf, "hello");
	ck_assert_uint_eq(len, 5);
	ck_assert_int_eq(gmem_copy_str(&mem, buf, LAYOUT_USER_BASE, 3, &len), -ENAMETOOLONG);
	memset(mem.host + RAM - 8, 'x', 8);
	ck_assert_int_eq(gmem_copy_str(&mem, buf, RAM - 8, sizeof(buf), &len), -EFAULT);
	ck_assert_int_eq(gmem_copy_str(&mem, buf, 100, sizeof(buf), &len), -EFAULT);
	/* A NUL past the first chunk is found, and one exactly at the limit is too late. */
	memset(mem.host + LAYOUT_USER_BASE, 'a', 1000);
	mem.host[LAYOUT_USER_BASE + 1000] = '\0';
	ck_assert_int_eq(gmem_copy_str(&mem, buf, LAYOUT_USER_BASE, sizeof(buf), &len), 0);
	ck_assert_uint_eq(len, 1000);
	ck_assert_int_eq(gmem_copy_str(&mem, buf, LAYOUT_USER_BASE, 1000, &len), -ENAMETOOLONG);
	ck_assert_int_eq(gmem_copy_str(&mem, buf, LAYOUT_USER_BASE, 1001, &len), 0);
}
END_TEST

/* Structures copy in and out only whole and inside user RAM. */
START_TEST(test_copy_in_out)
{
	uint64_t v = 0x1122334455667788ULL, w = 0;

	ck_assert_int_eq(gmem_copy_out(&mem, LAYOUT_USER_BASE, &v, sizeof(v)), 0);
	ck_assert_int_eq(gmem_copy_in(&mem, &w, LAYOUT_USER_BASE, sizeof(w)), 0);
	ck_assert_uint_eq(w, v);
	ck_assert_int_eq(gmem_copy_in(&mem, &w, RAM - 4, sizeof(w)), -EFAULT);
	ck_assert_int_eq(gmem_copy_out(&mem, RAM - 4, &v, sizeof(v)), -EFAULT);
	ck_assert_int_eq(gmem_copy_in(&mem, &w, LAYOUT_USER_BASE - 8, sizeof(w)), -EFAULT);
	ck_assert_int_eq(gmem_copy_in(&mem, &w, UINT64_MAX - 3, sizeof(w)), -EFAULT);
}
END_TEST

/* Discarded memory reads as zero again. */
START_TEST(test_discard_zeroes)
{
	uint8_t *p = mem.host + LAYOUT_USER_BASE;

	memset(p, 0xaa, 8192);
	ck_assert_int_eq(gmem_discard(&mem, LAYOUT_USER_BASE, 4096), 0);
	ck_assert_uint_eq(p[0], 0);
	ck_assert_uint_eq(p[4095], 0);
	ck_assert_uint_eq(p[4096], 0xaa);
	ck_assert_int_eq(gmem_discard(&mem, LAYOUT_USER_BASE + 1, 4096), -EINVAL);
	ck_assert_int_eq(gmem_discard(&mem, RAM - 4096, 8192), -EINVAL);
}
END_TEST

static bool marked(const uint64_t *bits, uint64_t gpa)
{
	uint64_t p = gpa / PAGE_SIZE;

	return bits[p / 64] >> (p % 64) & 1;
}

/* While marks are on (a pre-copy), every page the monitor may write through is marked:
 * pointers handed out, copies out, discards, held ranges, and the ranges of a call
 * blocked when the marks started; reads into the monitor are not. Off, nothing is. */
START_TEST(test_write_marks)
{
	static uint64_t bits[RAM / PAGE_SIZE / 64];
	const uint64_t u = LAYOUT_USER_BASE;
	struct gmem_span waiting = { 0 }, late = { 0 };
	uint64_t v = 1;

	ck_assert_ptr_nonnull(gmem_user_ptr_held(&mem, u + 20 * PAGE_SIZE, 8));
	gmem_span_add(&mem, &waiting, u + 30 * PAGE_SIZE, 2 * PAGE_SIZE);
	gmem_wait_begin(&mem, &waiting);
	ck_assert_ptr_nonnull(gmem_user_ptr(&mem, u, 8)); /* before: not seen */
	memset(bits, 0, sizeof(bits));
	gmem_mark_start(&mem, bits);
	ck_assert(marked(bits, u + 20 * PAGE_SIZE));
	ck_assert(marked(bits, u + 31 * PAGE_SIZE) && !marked(bits, u + 32 * PAGE_SIZE));
	ck_assert(!marked(bits, u));
	ck_assert_ptr_nonnull(gmem_user_ptr(&mem, u + PAGE_SIZE - 4, 8));
	ck_assert(marked(bits, u) && marked(bits, u + PAGE_SIZE));
	ck_assert_int_eq(gmem_copy_out(&mem, u + 5 * PAGE_SIZE, &v, sizeof(v)), 0);
	ck_assert(marked(bits, u + 5 * PAGE_SIZE));
	ck_assert_int_eq(gmem_copy_in(&mem, &v, u + 6 * PAGE_SIZE, sizeof(v)), 0);
	ck_assert(!marked(bits, u + 6 * PAGE_SIZE));
	ck_assert_int_eq(gmem_discard(&mem, u + 7 * PAGE_SIZE, PAGE_SIZE), 0);
	ck_assert(marked(bits, u + 7 * PAGE_SIZE));
	for (int i = 0; i < GMEM_SPAN_RANGES + 2; i++) /* past its ranges: the last grows */
		gmem_span_add(&mem, &late, u + (uint64_t)(40 + 2 * i) * PAGE_SIZE, 8);
	gmem_wait_begin(&mem, &late);
	ck_assert(marked(bits, u + 40 * PAGE_SIZE) && marked(bits, u + 50 * PAGE_SIZE));
	ck_assert(marked(bits, u + 47 * PAGE_SIZE));
	gmem_wait_end(&mem, &late);
	gmem_wait_end(&mem, &waiting);
	ck_assert_ptr_null(mem.waiting);
	gmem_mark_stop(&mem);
	ck_assert_ptr_nonnull(gmem_user_ptr(&mem, u + 9 * PAGE_SIZE, 8));
	ck_assert(!marked(bits, u + 9 * PAGE_SIZE));
}
END_TEST

struct runs {
	uint64_t first[8], n[8];
	int count;
};

static void note_run(void *ctx, uint64_t first, uint64_t n)
{
	struct runs *r = ctx;

	if (r->count < 8) {
		r->first[r->count] = first;
		r->n[r->count] = n;
	}
	r->count++;
}

/* The resident-page scanner reports exactly the pages that were written, as runs;
 * pages given back read as absent again. */
START_TEST(test_resident_runs)
{
	const uint64_t size = 64 * PAGE_SIZE;
	uint8_t *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct runs r = { 0 };

	ck_assert_ptr_ne(m, MAP_FAILED);
	madvise(m, size, MADV_NOHUGEPAGE);
	for (uint64_t p = 3; p < 6; p++)
		m[p * PAGE_SIZE] = 1;
	m[40 * PAGE_SIZE + 7] = 1;
	ck_assert_int_eq(resident_scan(m, size, note_run, &r), 0);
	ck_assert_int_eq(r.count, 2);
	ck_assert_uint_eq(r.first[0], 3);
	ck_assert_uint_eq(r.n[0], 3);
	ck_assert_uint_eq(r.first[1], 40);
	ck_assert_uint_eq(r.n[1], 1);
	ck_assert_int_eq(madvise(m + 4 * PAGE_SIZE, PAGE_SIZE, MADV_DONTNEED), 0);
	r.count = 0;
	ck_assert_int_eq(resident_scan(m, size, note_run, &r), 0);
	ck_assert_int_eq(r.count, 3);
	munmap(m, size);
}
END_TEST

Suite *gmem_suite(void)
{
	Suite *s = suite_create("gmem");
	TCase *tc = tcase_create("translate");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_map_aligned);
	tcase_add_test(tc, test_map_bad_sizes);
	tcase_add_test(tc, test_user_ptr_edges);
	tcase_add_test(tc, test_copy_str);
	tcase_add_test(tc, test_copy_in_out);
	tcase_add_test(tc, test_discard_zeroes);
	tcase_add_test(tc, test_write_marks);
	tcase_add_test(tc, test_resident_runs);
	suite_add_tcase(s, tc);
	return s;
}
