/*
 * test_pagetable.c - the page tables map RAM with the right rights, and nothing else.
 */
#include "suites.h"
#include "../../mmu/layout.h"
#include "../../mmu/pagetable.h"
#include "../../base/x86.h"

#include <errno.h>
#include <stdlib.h>

static uint8_t *sys;

static void setup(void)
{
	sys = aligned_alloc(4096, LAYOUT_SYS_END);
	ck_assert_ptr_nonnull(sys);
}

static void teardown(void)
{
	free(sys);
}

static uint64_t walk_flags(uint64_t cr3, uint64_t gva, int64_t *gpa)
{
	uint64_t flags = 0;

	*gpa = pt_walk(sys, cr3, gva, &flags);
	return flags;
}

/* Every part of RAM has the rights layout.h promises, and addresses map to themselves. */
START_TEST(test_rights)
{
	uint64_t cr3, f;
	int64_t gpa;

	ck_assert_int_eq(pt_build(sys, 64ULL << 20, &cr3), 0);
	ck_assert_uint_eq(cr3, LAYOUT_PGTABLE);
	f = walk_flags(cr3, 0, &gpa);
	ck_assert_msg(gpa == 0 && (f & PTE_P) && !(f & PTE_US), "system area: gpa %lld flags %#llx",
		      (long long)gpa, (unsigned long long)f);
	f = walk_flags(cr3, LAYOUT_STUBS + 5, &gpa);
	ck_assert_msg(gpa == (int64_t)LAYOUT_STUBS + 5 && (f & PTE_US) && !(f & PTE_RW),
		      "stub area must be user read-only: flags %#llx", (unsigned long long)f);
	f = walk_flags(cr3, LAYOUT_USER_BASE + 123, &gpa);
	ck_assert_msg(gpa == (int64_t)LAYOUT_USER_BASE + 123 && (f & PTE_US) && (f & PTE_RW),
		      "user area must be user read/write: flags %#llx", (unsigned long long)f);
	f = walk_flags(cr3, (64ULL << 20) - 1, &gpa);
	ck_assert_int_eq(gpa, (64LL << 20) - 1);
}
END_TEST

/* Nothing past the end of RAM is mapped, including across a GiB boundary. */
START_TEST(test_end_of_ram)
{
	uint64_t cr3, f;
	int64_t gpa;

	ck_assert_int_eq(pt_build(sys, (1ULL << 30) + (2ULL << 20), &cr3), 0);
	walk_flags(cr3, (1ULL << 30) + (2ULL << 20) - 1, &gpa);
	ck_assert_int_eq(gpa, (int64_t)((1ULL << 30) + (2ULL << 20) - 1));
	f = walk_flags(cr3, (1ULL << 30) + (2ULL << 20), &gpa);
	ck_assert_msg(gpa == -1, "past the end mapped to %lld (flags %#llx)", (long long)gpa,
		      (unsigned long long)f);
	walk_flags(cr3, 512ULL << 30, &gpa);
	ck_assert_int_eq(gpa, -1);
	walk_flags(cr3, 1ULL << 48, &gpa);
	ck_assert_int_eq(gpa, -1);
}
END_TEST

/* Sizes that cannot be built are refused. */
START_TEST(test_bad_sizes)
{
	uint64_t cr3;

	ck_assert_int_eq(pt_build(sys, 0, &cr3), -EINVAL);
	ck_assert_int_eq(pt_build(sys, (2ULL << 20) + 4096, &cr3), -EINVAL);
	ck_assert_int_eq(pt_build(sys, LAYOUT_MAX_RAM + (2ULL << 20), &cr3), -EINVAL);
	ck_assert_int_eq(pt_build(sys, LAYOUT_MAX_RAM, &cr3), 0);
}
END_TEST

Suite *pagetable_suite(void)
{
	Suite *s = suite_create("pagetable");
	TCase *tc = tcase_create("build");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_rights);
	tcase_add_test(tc, test_end_of_ram);
	tcase_add_test(tc, test_bad_sizes);
	suite_add_tcase(s, tc);
	return s;
}
