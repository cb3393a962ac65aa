/*
 * test_gmem.c - the checked translation of guest addresses, at the edges of RAM.
 */
#include "suites.h"
#include "../../mmu/gmem.h"
#include "../../mmu/layout.h"

#include <errno.h>
#include <string.h>

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
	suite_add_tcase(s, tc);
	return s;
}
