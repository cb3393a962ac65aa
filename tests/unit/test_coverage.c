/*
 * test_coverage.c - coverage arithmetic: counting, smoothing, classification at the
 * threshold, partial regions at the end of RAM, region sizes, coverage over durations.
 */
#include "suites.h"
#include "../../mmu/coverage.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define RAM (8ULL << 20) /* 2048 pages */

static uint64_t bitmap[RAM / 4096 / 64];

static void set_pages(uint64_t first, uint64_t n)
{
	for (uint64_t p = first; p < first + n; p++)
		bitmap[p / 64] |= 1ULL << (p % 64);
}

/* Coverage is the share of a region's pages written, per region. */
START_TEST(test_counts)
{
	struct coverage c;

	ck_assert_int_eq(coverage_init(&c, RAM, 2ULL << 20), 0);
	ck_assert_uint_eq(c.n_regions, 4);
	memset(bitmap, 0, sizeof(bitmap));
	set_pages(0, 512);       /* region 0: all */
	set_pages(512 + 3, 256); /* region 1: half, not word-aligned */
	set_pages(1535, 1);      /* region 2: its last page */
	coverage_add_window(&c, bitmap, 1.0);
	ck_assert_float_eq_tol(coverage_of(&c, 0, 1.0), 1.0 - 0.5 / 512, 1e-5);
	ck_assert_float_eq_tol(coverage_of(&c, 1, 1.0), 0.5, 1e-5);
	ck_assert_float_eq_tol(coverage_of(&c, 2, 1.0), 1.0 / 512, 1e-5);
	ck_assert_float_eq_tol(coverage_of(&c, 3, 1.0), 0.0, 1e-6);
	coverage_fini(&c);
}
END_TEST

/* Exactly at the threshold is hot, one page below is not; threshold 0 is CCoW-All. */
START_TEST(test_threshold_edge)
{
	struct coverage c;

	ck_assert_int_eq(coverage_init(&c, RAM, 2ULL << 20), 0);
	memset(bitmap, 0, sizeof(bitmap));
	set_pages(0, 410);       /* 410/512 = 0.8008 */
	set_pages(512, 409);     /* 409/512 = 0.7988 */
	coverage_add_window(&c, bitmap, 1.0);
	ck_assert(coverage_is_hot(&c, 0, 0.80, 1.0));
	ck_assert(!coverage_is_hot(&c, 1, 0.80, 1.0));
	ck_assert(coverage_is_hot(&c, 3, 0.0, 1.0));
	ck_assert(!coverage_is_hot(&c, 99, 0.0, 1.0));
	coverage_fini(&c);
}
END_TEST

/* Windows are smoothed: the write rate moves half way to each new window's. */
START_TEST(test_smoothing)
{
	struct coverage c;

	ck_assert_int_eq(coverage_init(&c, RAM, 2ULL << 20), 0);
	memset(bitmap, 0, sizeof(bitmap));
	set_pages(0, 384);                 /* 3/4: rate ln 4 */
	coverage_add_window(&c, bitmap, 1.0);
	memset(bitmap, 0, sizeof(bitmap)); /* nothing: rate 0 */
	coverage_add_window(&c, bitmap, 1.0);
	ck_assert_float_eq_tol(coverage_of(&c, 0, 1.0), 0.5, 1e-5); /* rate ln 2 */
	ck_assert(!coverage_is_hot(&c, 0, 0.8, 1.0));
	coverage_fini(&c);
}
END_TEST

/* A region larger than what is left of RAM counts only the pages that exist. */
START_TEST(test_partial_region)
{
	struct coverage c;
	uint64_t hist[COV_HIST_BUCKETS];

	ck_assert_int_eq(coverage_init(&c, 6ULL << 20, 4ULL << 20), 0);
	ck_assert_uint_eq(c.n_regions, 2);
	ck_assert_uint_eq(coverage_region_pages(&c, 0), 1024);
	ck_assert_uint_eq(coverage_region_pages(&c, 1), 512);
	memset(bitmap, 0, sizeof(bitmap));
	set_pages(1024, 512);
	coverage_add_window(&c, bitmap, 1.0);
	ck_assert_float_eq_tol(coverage_of(&c, 1, 1.0), 1.0 - 0.5 / 512, 1e-5);
	coverage_histogram(&c, 1.0, hist);
	ck_assert_uint_eq(hist[0], 1);
	ck_assert_uint_eq(hist[COV_HIST_BUCKETS - 1], 1);
	coverage_fini(&c);
}
END_TEST

/* Region sizes: powers of two from 32 KiB up; anything else is refused. */
START_TEST(test_region_sizes)
{
	struct coverage c;

	ck_assert_int_eq(coverage_init(&c, RAM, 32ULL << 10), 0);
	ck_assert_uint_eq(c.n_regions, 256);
	coverage_fini(&c);
	ck_assert_int_eq(coverage_init(&c, RAM, 16ULL << 10), -EINVAL);
	ck_assert_int_eq(coverage_init(&c, RAM, 3ULL << 20), -EINVAL);
	ck_assert_int_eq(coverage_init(&c, RAM, 0), -EINVAL);
	ck_assert_int_eq(coverage_init(&c, RAM, 8ULL << 20), 0);
	ck_assert_uint_eq(c.n_regions, 1);
	coverage_fini(&c);
}
END_TEST

/* Coverage follows the duration asked for: half the pages written in a window of
 * 0.5 s means three quarters in 1 s, and a quarter in 0.5 s means 1 - (3/4)^4 in 2 s;
 * whether a region is hot depends on how long the snapshot will take. */
START_TEST(test_duration)
{
	struct coverage c;

	ck_assert_int_eq(coverage_init(&c, RAM, 2ULL << 20), 0);
	memset(bitmap, 0, sizeof(bitmap));
	set_pages(0, 256);       /* region 0: half */
	set_pages(512, 128);     /* region 1: a quarter */
	coverage_add_window(&c, bitmap, 0.5);
	ck_assert_float_eq_tol(coverage_of(&c, 0, 0.5), 0.5, 1e-5);
	ck_assert_float_eq_tol(coverage_of(&c, 0, 1.0), 0.75, 1e-5);
	ck_assert_float_eq_tol(coverage_of(&c, 1, 2.0), 1.0 - 0.75 * 0.75 * 0.75 * 0.75, 1e-5);
	ck_assert_float_eq_tol(coverage_of(&c, 2, 100.0), 0.0, 1e-6);
	ck_assert(coverage_is_hot(&c, 0, 0.75, 1.0));
	ck_assert(!coverage_is_hot(&c, 0, 0.75, 0.5));
	ck_assert(!coverage_is_hot(&c, 1, 0.75, 1.0));
	coverage_add_window(&c, bitmap, 0.0); /* a window in which the guest never ran */
	ck_assert_uint_eq(c.windows, 1);
	coverage_fini(&c);
}
END_TEST

Suite *coverage_suite(void)
{
	Suite *s = suite_create("coverage");
	TCase *tc = tcase_create("arithmetic");

	tcase_add_test(tc, test_counts);
	tcase_add_test(tc, test_threshold_edge);
	tcase_add_test(tc, test_smoothing);
	tcase_add_test(tc, test_partial_region);
	tcase_add_test(tc, test_region_sizes);
	tcase_add_test(tc, test_duration);
	suite_add_tcase(s, tc);
	return s;
}
