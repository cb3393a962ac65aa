/*
 * test_vma.c - the guest memory map: insert, remove, split, merge, find free space.
 */
#include "suites.h"
#include "../../mmu/vma.h"

#include <errno.h>

#define K4 0x1000ULL
#define LO 0x400000ULL
#define HI 0x10000000ULL

static struct vma_map m;

static void setup(void)
{
	vma_map_init(&m, LO, HI);
}

static void teardown(void)
{
	vma_map_free(&m);
}

static const struct vma anon = { .kind = VMA_ANON, .prot = 3 };

/* Removing the middle of a mapping splits it; a file mapping's offset follows. */
START_TEST(test_split)
{
	struct vma file = { .kind = VMA_FILE, .prot = 1, .file_off = 0x10000 };

	ck_assert_int_eq(vma_insert(&m, 0x1000000, 0x1010000, &file), 0);
	ck_assert_int_eq(vma_remove(&m, 0x1004000, 0x1008000), 0);
	ck_assert_int_eq(m.n, 2);
	ck_assert_uint_eq(m.v[0].end, 0x1004000);
	ck_assert_uint_eq(m.v[1].start, 0x1008000);
	ck_assert_uint_eq(m.v[1].file_off, 0x18000);
	ck_assert(vma_range_free(&m, 0x1004000, 0x1008000));
	ck_assert(!vma_range_mapped(&m, 0x1000000, 0x1010000));
	ck_assert(vma_range_mapped(&m, 0x1008000, 0x1010000));
}
END_TEST

/* The 2 MiB blocks a fork shares: each one a mapping touches, by a byte or whole;
 * none past the map's blocks. */
START_TEST(test_blocks)
{
	const uint64_t block = 2ULL << 20;
	uint64_t bits[2] = { ~0ULL, ~0ULL };

	ck_assert_int_eq(vma_insert(&m, 3 * block - K4, 3 * block + K4, &anon), 0); /* 2, 3 */
	ck_assert_int_eq(vma_insert(&m, 10 * block, 11 * block, &anon), 0);          /* 10 */
	ck_assert_int_eq(vma_insert(&m, 70 * block, 70 * block + K4, &anon), 0);     /* 70: out */
	vma_map_blocks(&m, block, bits, 64);
	ck_assert_uint_eq(bits[0], (1ULL << 2) | (1ULL << 3) | (1ULL << 10));
	ck_assert_uint_eq(bits[1], ~0ULL); /* past n bits: untouched */
}
END_TEST

/* Adjacent compatible mappings merge, so the map does not grow without bound. */
START_TEST(test_merge)
{
	struct vma ro = anon;

	ro.prot = 1;
	for (uint64_t a = 0x1000000; a < 0x1100000; a += K4)
		ck_assert_int_eq(vma_insert(&m, a, a + K4, &anon), 0);
	ck_assert_int_eq(m.n, 1);
	ck_assert_int_eq(vma_insert(&m, 0x1050000, 0x1060000, &ro), 0);
	ck_assert_int_eq(m.n, 3);
	ck_assert_int_eq(vma_insert(&m, 0x1050000, 0x1060000, &anon), 0);
	ck_assert_int_eq(m.n, 1);
}
END_TEST

/* Free space is found top-down below the ceiling, skipping mappings, or not at all. */
START_TEST(test_find_free)
{
	uint64_t a;

	ck_assert_int_eq(vma_find_free(&m, 0x10000, HI, K4, &a), 0);
	ck_assert_uint_eq(a, HI - 0x10000);
	ck_assert_int_eq(vma_insert(&m, HI - 0x10000, HI, &anon), 0);
	ck_assert_int_eq(vma_find_free(&m, 0x10000, HI, K4, &a), 0);
	ck_assert_uint_eq(a, HI - 0x20000);
	ck_assert_int_eq(vma_find_free(&m, 0x200000, HI, 0x200000, &a), 0);
	ck_assert_uint_eq(a % 0x200000, 0);
	ck_assert_int_eq(vma_find_free(&m, HI, HI, K4, &a), -ENOMEM);
	ck_assert_int_eq(vma_find_free(&m, 0x1000, HI, 3, &a), -EINVAL);
	ck_assert_int_eq(vma_insert(&m, LO, HI - 0x10000, &anon), 0);
	ck_assert_int_eq(vma_find_free(&m, K4, HI, K4, &a), -ENOMEM);
}
END_TEST

/* Inserting over existing mappings replaces exactly the covered part. */
START_TEST(test_replace)
{
	struct vma ro = anon;
	struct vma *v;

	ro.prot = 1;
	ck_assert_int_eq(vma_insert(&m, 0x1000000, 0x1004000, &anon), 0);
	ck_assert_int_eq(vma_insert(&m, 0x1008000, 0x100c000, &anon), 0);
	ck_assert_int_eq(vma_insert(&m, 0x1002000, 0x100a000, &ro), 0);
	ck_assert_int_eq(m.n, 3);
	v = vma_find(&m, 0x1005000);
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(v->prot, 1);
	ck_assert_ptr_null(vma_find(&m, 0x100c000));
	ck_assert_uint_eq(vma_next_start(&m, 0x100c000), HI);
	ck_assert_int_eq(vma_insert(&m, 5, 5, &anon), -EINVAL);
}
END_TEST

Suite *vma_suite(void)
{
	Suite *s = suite_create("vma");
	TCase *tc = tcase_create("map");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_split);
	tcase_add_test(tc, test_blocks);
	tcase_add_test(tc, test_merge);
	tcase_add_test(tc, test_find_free);
	tcase_add_test(tc, test_replace);
	suite_add_tcase(s, tc);
	return s;
}
