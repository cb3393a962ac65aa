/*
 * test_coverage.c - coverage arithmetic: counting, pooling, windows that watched some
 * pages, snapshots' own observations, classification at the threshold and with
 * hysteresis, partial regions at the end of RAM, region sizes, coverage over durations;
 * and the page heat that ranks recently written pages.
 */
#include "suites.h"
#include "../../mmu/coverage.h"
#include "../../mmu/heat.h"

#include <errno.h>
#include <math.h>
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
	coverage_add_window(&c, bitmap, NULL, 1.0);
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
	coverage_add_window(&c, bitmap, NULL, 1.0);
	ck_assert(coverage_is_hot(&c, 0, 0.80, 1.0));
	ck_assert(!coverage_is_hot(&c, 1, 0.80, 1.0));
	ck_assert(coverage_is_hot(&c, 3, 0.0, 1.0));
	ck_assert(!coverage_is_hot(&c, 99, 0.0, 1.0));
	coverage_fini(&c);
}
END_TEST

/* Observations are pooled by their length, older ones scaled by 0.7 at each fold:
 * 3/4 written in 1 s (ln 4 hits), then nothing in 1 s, gives a rate of
 * 0.7 ln 4 / 1.7 per second. */
START_TEST(test_smoothing)
{
	struct coverage c;
	double rate = 0.7 * log(4.0) / 1.7;

	ck_assert_int_eq(coverage_init(&c, RAM, 2ULL << 20), 0);
	memset(bitmap, 0, sizeof(bitmap));
	set_pages(0, 384);                 /* 3/4: rate ln 4 */
	coverage_add_window(&c, bitmap, NULL, 1.0);
	memset(bitmap, 0, sizeof(bitmap)); /* nothing */
	coverage_add_window(&c, bitmap, NULL, 1.0);
	ck_assert_float_eq_tol(coverage_of(&c, 0, 1.0), 1.0 - exp(-rate), 1e-5);
	ck_assert(!coverage_is_hot(&c, 0, 0.8, 1.0));
	coverage_fini(&c);
}
END_TEST

/* A window that watched only some pages counts the share among those, and leaves a
 * region it did not watch at all as it was. */
START_TEST(test_sampled_window)
{
	struct coverage c;
	uint64_t watched[RAM / 4096 / 64];

	ck_assert_int_eq(coverage_init(&c, RAM, 2ULL << 20), 0);
	memset(bitmap, 0, sizeof(bitmap));
	memset(watched, 0, sizeof(watched));
	for (uint64_t p = 0; p < 128; p++)  /* region 0: 128 watched, 64 of them written */
		watched[p / 64] |= 1ULL << (p % 64);
	set_pages(0, 64);
	coverage_add_window(&c, bitmap, watched, 1.0);
	ck_assert_float_eq_tol(coverage_of(&c, 0, 1.0), 0.5, 1e-5);
	ck_assert_float_eq_tol(coverage_of(&c, 1, 1.0), 0.0, 1e-6);
	ck_assert_float_eq_tol(c.seconds[1], 0.0, 1e-9); /* nothing known of region 1 */
	coverage_fini(&c);
}
END_TEST

/* A snapshot's own observation: exposure is in progress counts, converted by the rate
 * the guest makes progress at; a region with no present pages is left alone. */
START_TEST(test_snapshot_observation)
{
	struct coverage c;
	struct cov_obs obs[4] = {
		{ .written = 256, .pages = 512, .exposure = 512 * 200.0 }, /* half, 2 s each */
		{ .written = 0, .pages = 512, .exposure = 512 * 100.0 },   /* none, 1 s each */
		{ .written = 0, .pages = 0, .exposure = 0 },
		{ .written = 512, .pages = 512, .exposure = 512 * 50.0 },  /* all in 0.5 s */
	};

	ck_assert_int_eq(coverage_init(&c, RAM, 2ULL << 20), 0);
	coverage_add_snapshot(&c, obs, 0.0); /* no rate known: nothing folded */
	ck_assert_uint_eq(c.snapshots, 0);
	coverage_add_snapshot(&c, obs, 100.0);
	ck_assert_uint_eq(c.snapshots, 1);
	ck_assert_float_eq_tol(coverage_of(&c, 0, 2.0), 0.5, 1e-5);
	ck_assert_float_eq_tol(coverage_of(&c, 0, 4.0), 0.75, 1e-5);
	ck_assert_float_eq_tol(coverage_of(&c, 1, 10.0), 0.0, 1e-6);
	ck_assert_float_eq_tol(c.seconds[2], 0.0, 1e-9);
	ck_assert_float_eq_tol(coverage_of(&c, 3, 0.5), 1.0 - 0.5 / 512, 1e-5);
	coverage_fini(&c);
}
END_TEST

/* Classification with hysteresis: a region becomes hot at the threshold and stays hot
 * down to the threshold less 0.1; threshold 0 makes all hot. */
START_TEST(test_classify_hysteresis)
{
	struct coverage c;
	uint8_t hot[4] = { 0, 0, 1, 1 };

	ck_assert_int_eq(coverage_init(&c, RAM, 2ULL << 20), 0);
	memset(bitmap, 0, sizeof(bitmap));
	set_pages(0, 435);        /* region 0: 0.85 - hot */
	set_pages(512, 384);      /* region 1: 0.75 - cold (was cold) */
	set_pages(1024, 384);     /* region 2: 0.75 - stays hot (was hot) */
	set_pages(1536, 307);     /* region 3: 0.60 - no longer hot */
	coverage_add_window(&c, bitmap, NULL, 1.0);
	ck_assert_uint_eq(coverage_classify(&c, 0.80, 1.0, hot), 2);
	ck_assert_uint_eq(hot[0], 1);
	ck_assert_uint_eq(hot[1], 0);
	ck_assert_uint_eq(hot[2], 1);
	ck_assert_uint_eq(hot[3], 0);
	ck_assert_uint_eq(coverage_classify(&c, 0.0, 1.0, hot), 4);
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
	coverage_add_window(&c, bitmap, NULL, 1.0);
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
	coverage_add_window(&c, bitmap, NULL, 0.5);
	ck_assert_float_eq_tol(coverage_of(&c, 0, 0.5), 0.5, 1e-5);
	ck_assert_float_eq_tol(coverage_of(&c, 0, 1.0), 0.75, 1e-5);
	ck_assert_float_eq_tol(coverage_of(&c, 1, 2.0), 1.0 - 0.75 * 0.75 * 0.75 * 0.75, 1e-5);
	ck_assert_float_eq_tol(coverage_of(&c, 2, 100.0), 0.0, 1e-6);
	ck_assert(coverage_is_hot(&c, 0, 0.75, 1.0));
	ck_assert(!coverage_is_hot(&c, 0, 0.75, 0.5));
	ck_assert(!coverage_is_hot(&c, 1, 0.75, 1.0));
	coverage_add_window(&c, bitmap, NULL, 0.0); /* a window in which the guest never ran */
	ck_assert_uint_eq(c.windows, 1);
	coverage_fini(&c);
}
END_TEST

/* Page heat: the pages of the last observation rank first, then those of the one
 * before, pages written in both above either; a page not watched is not taken as
 * written; after 8 observations without a write a page has no rank; @max cuts the
 * list, hottest first. */
START_TEST(test_page_heat)
{
	static uint64_t watched[RAM / 4096 / 64];
	struct page_heat h;
	uint32_t out[RAM / 4096];

	ck_assert_int_eq(heat_init(&h, RAM / 4096), 0);
	ck_assert_uint_eq(heat_rank(&h, HEAT_MIN, out, RAM / 4096), 0);
	memset(bitmap, 0, sizeof(bitmap));
	set_pages(10, 3);                          /* 10, 11, 12 */
	heat_fold(&h, bitmap, NULL);
	memset(bitmap, 0, sizeof(bitmap));
	set_pages(11, 1);
	set_pages(700, 1);
	set_pages(900, 1);
	memset(watched, 0xff, sizeof(watched));
	watched[900 / 64] &= ~(1ULL << (900 % 64)); /* 900 not watched */
	heat_fold(&h, bitmap, watched);
	ck_assert_uint_eq(heat_rank(&h, HEAT_MIN, out, RAM / 4096), 4);
	ck_assert_uint_eq(out[0], 11);             /* both observations */
	ck_assert_uint_eq(out[1], 700);            /* the last one */
	ck_assert_uint_eq(out[2], 10);             /* the one before, address order */
	ck_assert_uint_eq(out[3], 12);
	ck_assert_uint_eq(heat_rank(&h, HEAT_MIN, out, 2), 2);
	ck_assert_uint_eq(out[0], 11);
	ck_assert_uint_eq(out[1], 700);
	memset(bitmap, 0, sizeof(bitmap));
	for (int i = 0; i < 8; i++)
		heat_fold(&h, bitmap, NULL);
	ck_assert_uint_eq(heat_rank(&h, HEAT_MIN, out, RAM / 4096), 0);
	ck_assert_uint_eq(h.observations, 10);
	heat_fini(&h);
}
END_TEST

Suite *coverage_suite(void)
{
	Suite *s = suite_create("coverage");
	TCase *tc = tcase_create("arithmetic");

	tcase_add_test(tc, test_counts);
	tcase_add_test(tc, test_threshold_edge);
	tcase_add_test(tc, test_smoothing);
	tcase_add_test(tc, test_sampled_window);
	tcase_add_test(tc, test_snapshot_observation);
	tcase_add_test(tc, test_classify_hysteresis);
	tcase_add_test(tc, test_partial_region);
	tcase_add_test(tc, test_region_sizes);
	tcase_add_test(tc, test_duration);
	tcase_add_test(tc, test_page_heat);
	suite_add_tcase(s, tc);
	return s;
}
