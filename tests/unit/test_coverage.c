/*
 * test_coverage.c - coverage arithmetic: counting, smoothing, classification at the
 * threshold, partial regions at the end of RAM, region sizes.
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
	coverage_add_window(&c, bitmap);
	ck_assert_float_eq_tol(c.cov[0], 1.0, 1e-6);
	ck_assert_float_eq_tol(c.cov[1], 0.5, 1e-6);
	ck_assert_float_eq_tol(c.cov[2], 1.0 / 512, 1e-6);
	ck_assert_float_eq_tol(c.cov[3], 0.0, 1e-6);
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
	coverage_add_window(&c, bitmap);
	ck_assert(coverage_is_hot(&c, 0, 0.80));
	ck_assert(!coverage_is_hot(&c, 1, 0.80));
	ck_assert(coverage_is_hot(&c, 3, 0.0));
	ck_assert(!coverage_is_hot(&c, 99, 0.0));
	coverage_fini(&c);
}
END_TEST

/* Windows are smoothed: one odd window moves coverage half way. */
START_TEST(test_smoothing)
{
	struct coverage c;

	ck_assert_int_eq(coverage_init(&c, RAM, 2ULL << 20), 0);
	memset(bitmap, 0, sizeof(bitmap));
	set_pages(0, 512);
	coverage_add_window(&c, bitmap);
	memset(bitmap, 0, sizeof(bitmap));
	coverage_add_window(&c, bitmap);
	ck_assert_float_eq_tol(c.cov[0], 0.5, 1e-6);
	ck_assert(!coverage_is_hot(&c, 0, 0.8));
	set_pages(0, 512);
	coverage_add_window(&c, bitmap);
	ck_assert_float_eq_tol(c.cov[0], 0.75, 1e-6);
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
	coverage_add_window(&c, bitmap);
	ck_assert_float_eq_tol(c.cov[1], 1.0, 1e-6);
	coverage_histogram(&c, hist);
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

Suite *coverage_suite(void)
{
	Suite *s = suite_create("coverage");
	TCase *tc = tcase_create("arithmetic");

	tcase_add_test(tc, test_counts);
	tcase_add_test(tc, test_threshold_edge);
	tcase_add_test(tc, test_smoothing);
	tcase_add_test(tc, test_partial_region);
	tcase_add_test(tc, test_region_sizes);
	suite_add_tcase(s, tc);
	return s;
}
