/*
 * test_tracker.c - the coverage tracker's window policy (mmu/tracker.c) against a fake
 * dirty log, no VM: the log reports the first regions of memory as written whenever a
 * window reads it, and the guest's progress is a clock. The tracker must open a window
 * after its start-up gap, count it, classify exactly those regions hot, keep windows
 * shut while a snapshot holds it, and learn from snapshots' observations alone when
 * it has no log; and keep its budget when every page it watches is written.
 */
#include "suites.h"
#include "../../mmu/tracker.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TR_RAM (32ULL << 20)
#define TR_REGION (2ULL << 20)
#define TR_REGIONS (TR_RAM / TR_REGION)
#define TR_HOT 4                  /* the fake log's written regions: 0 .. TR_HOT-1 */
#define TR_WINDOW_MS 100
#define TR_WAIT_S 10
#define TR_PAGES_PER_REGION (TR_REGION / 4096)

struct fake_log {
	int logging_on, logging_off, watches, gets;
	bool on;
};

static struct fake_log fl;
static uint8_t *tr_mem;
static struct tracker tr;

static int fake_logging(void *ctx, bool on)
{
	struct fake_log *f = ctx;

	f->on = on;
	if (on)
		f->logging_on++;
	else
		f->logging_off++;
	return 0;
}

static int fake_watch(void *ctx, uint64_t *pages)
{
	(void)pages;
	((struct fake_log *)ctx)->watches++;
	return 0;
}

/* Every page of the first TR_HOT regions written, nothing else. */
static int fake_get(void *ctx, uint64_t *bitmap)
{
	((struct fake_log *)ctx)->gets++;
	memset(bitmap, 0, TR_RAM / 4096 / 8);
	memset(bitmap, 0xff, TR_HOT * TR_PAGES_PER_REGION / 8);
	return 0;
}

static const struct tracker_log_ops fake_ops = {
	.logging = fake_logging, .watch = fake_watch, .get = fake_get,
};

/* Every page written: each window's whole sample faults, the budget's worst case. */
static int fake_get_all(void *ctx, uint64_t *bitmap)
{
	((struct fake_log *)ctx)->gets++;
	memset(bitmap, 0xff, TR_RAM / 4096 / 8);
	return 0;
}

static const struct tracker_log_ops fake_all_ops = {
	.logging = fake_logging, .watch = fake_watch, .get = fake_get_all,
};

/* The guest's progress: microseconds of the monotonic clock, so it never stalls. */
static uint64_t clock_progress(const void *ctx)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

static void tr_sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void tr_setup(void)
{
	memset(&fl, 0, sizeof(fl));
	/* Resident memory: the tracker watches only pages that hold data. */
	ck_assert_int_eq(posix_memalign((void **)&tr_mem, TR_REGION, TR_RAM), 0);
	memset(tr_mem, 1, TR_RAM);
}

static void tr_teardown(void)
{
	tracker_fini(&tr);
	free(tr_mem);
}

/* Classify at @threshold until @want regions are hot; false after TR_WAIT_S. */
static bool tr_wait_hot(double threshold, uint64_t want, uint8_t *hot)
{
	for (int i = 0; i < TR_WAIT_S * 20; i++) {
		if (tracker_classify(&tr, threshold, hot) == want)
			return true;
		tr_sleep_ms(50);
	}
	return false;
}

/* A window opens after the start-up gap, reads the log, counts, and the regions the
 * log said were written are hot; the others are not. */
START_TEST(test_window_classifies)
{
	struct tracker_log log = { .ops = &fake_ops, .ctx = &fl };
	uint8_t hot[TR_REGIONS];

	ck_assert_int_eq(tracker_init(&tr, &log, tr_mem, TR_RAM, TR_REGION, TR_WINDOW_MS,
					(struct tracker_progress){ .read = clock_progress }, NULL), 0);
	ck_assert_uint_eq(tracker_classify(&tr, 0.8, hot), 0); /* nothing known yet */
	ck_assert_uint_eq(tracker_classify(&tr, 0, hot), TR_REGIONS); /* CCoW-All */
	ck_assert_msg(tr_wait_hot(0.8, TR_HOT, hot), "no window was counted (%d gets)", fl.gets);
	for (uint64_t r = 0; r < TR_REGIONS; r++)
		ck_assert_int_eq(hot[r], r < TR_HOT);
	ck_assert_uint_ge(tr.harvests, 1);
	ck_assert_int_ge(fl.logging_on, 1);
	ck_assert_int_ge(fl.watches, 1);
	ck_assert_double_gt(tr.progress_rate, 0);
}
END_TEST

/* While a snapshot holds the tracker no window is open, and none opens. */
START_TEST(test_hold_shuts_windows)
{
	struct tracker_log log = { .ops = &fake_ops, .ctx = &fl };
	uint8_t hot[TR_REGIONS];
	int gets;

	ck_assert_int_eq(tracker_init(&tr, &log, tr_mem, TR_RAM, TR_REGION, TR_WINDOW_MS,
					(struct tracker_progress){ .read = clock_progress }, NULL), 0);
	ck_assert(tr_wait_hot(0.8, TR_HOT, hot));
	tracker_hold(&tr, true);
	ck_assert(!fl.on);
	gets = fl.gets;
	tr_sleep_ms(600); /* a free tracker opens a window every ~0.1 s here */
	ck_assert(!fl.on);
	ck_assert_int_eq(fl.gets, gets);
	tracker_hold(&tr, false);
	for (int i = 0; i < TR_WAIT_S * 20 && fl.gets == gets; i++)
		tr_sleep_ms(50);
	ck_assert_int_gt(fl.gets, gets);
}
END_TEST

/* Without a log: no window ever, but a snapshot's observation, timed by the
 * progress, makes its fully written regions hot; adaptive windows follow snapshots. */
START_TEST(test_snapshots_only)
{
	struct cov_obs obs[TR_REGIONS];
	uint8_t hot[TR_REGIONS];

	ck_assert_int_eq(tracker_init(&tr, NULL, tr_mem, TR_RAM, TR_REGION, 0,
					(struct tracker_progress){ .read = clock_progress }, NULL), 0);
	for (int i = 0; i < TR_WAIT_S * 20 && tr.progress_rate <= 0; i++)
		tr_sleep_ms(50);
	ck_assert_double_gt(tr.progress_rate, 0);
	memset(obs, 0, sizeof(obs));
	for (uint64_t r = 0; r < TR_REGIONS; r++) {
		obs[r].pages = TR_PAGES_PER_REGION;
		obs[r].written = r < 2 ? TR_PAGES_PER_REGION : 0;
		obs[r].exposure = (double)TR_PAGES_PER_REGION * tr.progress_rate * 0.5;
	}
	/* Too little progress during it: ignored. */
	tracker_snapshot_observed(&tr, obs, 1);
	ck_assert_uint_eq(tracker_classify(&tr, 0.8, hot), 0);
	tracker_snapshot_observed(&tr, obs, (uint64_t)(tr.progress_rate * 0.5));
	ck_assert_uint_eq(tracker_classify(&tr, 0.8, hot), 2);
	ck_assert(hot[0] && hot[1] && !hot[2]);
	ck_assert_uint_eq(tr.harvests, 0);
	tracker_snapshot_took(&tr, 3.0);
	ck_assert_double_eq(tr.window_s, 3.0);
	tracker_snapshot_took(&tr, 100.0);
	ck_assert_double_eq(tr.window_s, 10.0);
}
END_TEST

static double tr_now(void)
{
	return (double)clock_progress(NULL) / 1e6;
}

/* A guest that writes every page it touches: every sampled page faults, and still the
 * tracker's accounts keep both bounds: no more than the stall bound's faults in a
 * window, none closer than a span, and no more than the budget's in any second. */
START_TEST(test_budget_kept)
{
	struct tracker_log log = { .ops = &fake_all_ops, .ctx = &fl };
	struct tracker_budget b = tracker_budget_default(0.8);
	double t0 = tr_now(), elapsed;
	uint64_t windows, faults;
	double lost, stall;

	b.stall_ms = 1.0; /* 10 pages a window at 100 us a fault */
	ck_assert_int_eq(tracker_init(&tr, &log, tr_mem, TR_RAM, TR_REGION, TR_WINDOW_MS,
					(struct tracker_progress){ .read = clock_progress }, &b), 0);
	ck_assert_uint_eq(tr.max_sample, 10);
	tr_sleep_ms(3500);
	pthread_mutex_lock(&tr.w.lock);
	elapsed = tr_now() - t0;
	windows = tr.windows;
	faults = tr.faults;
	lost = tr.lost_s;
	stall = tr.longest_stall_s;
	pthread_mutex_unlock(&tr.w.lock);
	ck_assert_uint_gt(windows, 2);
	ck_assert_uint_eq(faults, windows * 10); /* every sample written, each charged */
	ck_assert_double_le(stall, 0.001 + 1e-12);
	ck_assert_double_le(lost, 0.01 * elapsed);
	/* Everything written: the sampled regions are hot. */
	ck_assert_uint_gt(tracker_classify(&tr, 0.8, (uint8_t[TR_REGIONS]){ 0 }), 0);
}
END_TEST

/* A budget of 0 opens no window at all: coverage then comes from snapshots alone. */
START_TEST(test_budget_zero)
{
	struct tracker_log log = { .ops = &fake_all_ops, .ctx = &fl };
	struct tracker_budget b = tracker_budget_default(0.8);

	b.pct = 0;
	ck_assert_int_eq(tracker_init(&tr, &log, tr_mem, TR_RAM, TR_REGION, TR_WINDOW_MS,
					(struct tracker_progress){ .read = clock_progress }, &b), 0);
	ck_assert_uint_eq(tr.max_sample, 0);
	tr_sleep_ms(1500);
	ck_assert_int_eq(fl.logging_on, 0);
	ck_assert_uint_eq(tr.windows, 0);
	b.pct = 101;
	tracker_fini(&tr);
	ck_assert_int_eq(tracker_init(&tr, &log, tr_mem, TR_RAM, TR_REGION, TR_WINDOW_MS,
					(struct tracker_progress){ .read = clock_progress }, &b),
			 -EINVAL);
}
END_TEST

Suite *tracker_suite(void)
{
	Suite *s = suite_create("tracker");
	TCase *tc = tcase_create("windows");

	tcase_add_checked_fixture(tc, tr_setup, tr_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_window_classifies);
	tcase_add_test(tc, test_hold_shuts_windows);
	tcase_add_test(tc, test_snapshots_only);
	tcase_add_test(tc, test_budget_kept);
	tcase_add_test(tc, test_budget_zero);
	suite_add_tcase(s, tc);
	return s;
}
