/*
 * test_codec_auto.c - `--compress auto`'s choice (snapshot/codec_auto.c): raw for data
 * that does not shrink, a climb up the ladder while the disk is the bottleneck, a step
 * down when the compressors are, two rungs mixed between, one thread's trade of CPU
 * for writes, the disk's and the compressors' busy time counted once when they
 * overlap, and raw while the host has no CPU to spare.
 */
#include "suites.h"
#include "../../snapshot/codec_auto.h"
#include "../../base/hostcpu.h"
#include "../../base/mono.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CA_LEN (2u << 20)  /* a chunk */

static uint8_t *ca_data, *ca_scratch;

static void ca_setup(void)
{
	ca_data = malloc(CA_LEN);
	ca_scratch = malloc(codec_bound(CA_LEN));
	ck_assert_ptr_nonnull(ca_data);
	ck_assert_ptr_nonnull(ca_scratch);
}

static void ca_teardown(void)
{
	free(ca_data);
	free(ca_scratch);
}

static void ca_random(void)
{
	srandom(11);
	for (size_t i = 0; i < CA_LEN; i++)
		ca_data[i] = (uint8_t)random();
}

/* Words and numbers, about as compressible as a Redis dump's text. */
static void ca_text(void)
{
	static const char *const words[] = { "user", "field0", "value", "session", "cart",
					     "item", "price", "count", "status", "ok" };
	size_t n = 0;

	srandom(12);
	while (n < CA_LEN) {
		char rec[64];
		int len = snprintf(rec, sizeof(rec), "%s:%ld=%s;", words[random() % 10],
				   random() % 100000, words[random() % 10]);

		for (int i = 0; i < len && n < CA_LEN; i++)
			ca_data[n++] = (uint8_t)rec[i];
	}
}

static void ca_choose(struct codec_auto *a, struct cauto_choice *ch)
{
	cauto_choose(a, ca_data, CA_LEN, ca_scratch, codec_bound(CA_LEN), ch);
}

/* Random bytes fail the probe: raw, and the probe says they did not shrink. */
START_TEST(test_incompressible_raw)
{
	struct codec_auto a;
	struct cauto_choice ch;

	cauto_init(&a);
	a.step = CAUTO_RUNGS - 1; /* even where the disk waits: nothing to gain */
	ca_random();
	ca_choose(&a, &ch);
	ck_assert_int_eq(ch.codec, IMG_CODEC_NONE);
	ck_assert(ch.probe > 1.0 - CAUTO_PROBE_GAIN);
	cauto_fini(&a);
}
END_TEST

static void ca_nap_ms(long ms)
{
	struct timespec ts = { .tv_nsec = ms * 1000000L };

	nanosleep(&ts, NULL);
}

/* @a fresh, at place @step of the ladder, for a snapshot on @threads threads of the
 * chunk text. */
static void ca_text_at(struct codec_auto *a, int threads, double step)
{
	cauto_init(a);
	a->idle_ns = NULL; /* the host's idle CPU not read: the rule alone */
	ca_text();
	cauto_begin(a, threads);
	a->step = step;
}

/* A chunk through one of @a's threads: compressed in @comp_us, written in @write_us
 * (not at all when 0: the disk's rate then stays the one carried). */
static void ca_through(struct codec_auto *a, double comp_us, double write_us)
{
	cauto_compress_begin(a);
	cauto_compressed(a, CA_LEN, CA_LEN / 2, (uint64_t)(comp_us * 1e3), (uint64_t)(comp_us * 1e3));
	if (!write_us)
		return;
	cauto_io_begin(a);
	cauto_io_end(a, CA_LEN / 2, (uint64_t)(write_us * 1e3));
}

/* Writes that take longer than compressing (the disk is the bottleneck): auto climbs
 * from raw to the top of the ladder, zstd 3. */
START_TEST(test_climbs_while_disk_waits)
{
	struct codec_auto a;
	struct cauto_choice ch;

	ca_text_at(&a, 2, 0);
	for (int i = 0; i < 200; i++) {
		ca_choose(&a, &ch);
		ca_through(&a, 1000, 5000);
	}
	ca_choose(&a, &ch);
	ck_assert_msg(a.step == CAUTO_RUNGS - 1, "step %.2f", a.step);
	ck_assert_int_eq(ch.codec, IMG_CODEC_ZSTD);
	ck_assert_int_eq(ch.level, 3);
	ck_assert(ch.probe < 0.7);
	cauto_fini(&a);
}
END_TEST

/* Compressing longer than the writes take (the compressors are the bottleneck): auto
 * steps down from zstd 3 to raw, even for data that compresses well. */
START_TEST(test_steps_down_when_compressing_is_slower)
{
	struct codec_auto a;
	struct cauto_choice ch;
	int raw = 0;

	ca_text_at(&a, 2, CAUTO_RUNGS - 1);
	for (int i = 0; i < 200; i++) {
		ca_choose(&a, &ch);
		ca_through(&a, 5000, 1000);
	}
	ck_assert_msg(a.step == CAUTO_STEP_MIN, "step %.2f", a.step);
	for (int i = 0; i < 8; i++) { /* at the floor: raw but one chunk in eight */
		ca_choose(&a, &ch);
		raw += ch.codec == IMG_CODEC_NONE;
	}
	ck_assert_int_eq(raw, 7);
	ck_assert(ch.probe < 0.7); /* not the early abort */
	cauto_fini(&a);
}
END_TEST

/* Each rung's times in a model pipeline of two threads: compressing slower and writing
 * less up the ladder. Compressing catches up with the other thread's write between
 * zstd -1 (3 ms against 2.2) and LZ4 1 (2 against 2.4), so auto settles there. */
START_TEST(test_settles_where_compressing_meets_writing)
{
	static const double comp_us[CAUTO_RUNGS] = { 0, 1000, 2000, 3000, 4000, 6000 };
	static const double write_us[CAUTO_RUNGS] = { 4000, 2500, 2400, 2200, 2000, 1900 };
	struct codec_auto a;
	struct cauto_choice ch;

	for (double from = 0; from < CAUTO_RUNGS; from += CAUTO_RUNGS - 1) {
		ca_text_at(&a, 2, from);
		for (int i = 0; i < 200; i++) {
			ca_choose(&a, &ch);
			ca_through(&a, comp_us[ch.rung], write_us[ch.rung]);
		}
		ck_assert_msg(a.step >= 2.0 && a.step <= 3.0, "from %.0f: step %.2f", from, a.step);
		cauto_fini(&a);
	}
}
END_TEST

/* A place between two rungs mixes them chunk by chunk: 1.25, a quarter LZ4 1 and the
 * rest LZ4 -4, when nothing moves it. */
START_TEST(test_place_mixes_rungs)
{
	struct codec_auto a;
	struct cauto_choice ch;
	int tried[CAUTO_RUNGS] = { 0 };

	ca_text_at(&a, 2, 1.25);
	for (int i = 0; i < 100; i++) {
		ca_choose(&a, &ch);
		tried[ch.rung]++;
	}
	ck_assert_msg(a.step == 1.25, "step %.2f", a.step);
	ck_assert_int_eq(tried[1], 75);
	ck_assert_int_eq(tried[2], 25);
	ck_assert_int_eq(ch.codec, IMG_CODEC_LZ4);
	cauto_fini(&a);
}
END_TEST

/* One thread compresses and then writes, so nothing overlaps: compressing pays only
 * when the write time it saves is more than its own. 1 ms to halve a chunk saves ~21 ms
 * on a 50 MB/s disk (climb) and ~0.1 ms on a 10 GB/s one (down). */
START_TEST(test_one_thread_weighs_saved_writes)
{
	struct codec_auto a;
	struct cauto_choice ch;

	for (int fast = 0; fast < 2; fast++) {
		ca_text_at(&a, 1, 2.0);
		a.disk_rate = fast ? 10e9 : 50e6;
		for (int i = 0; i < 150; i++) {
			ca_choose(&a, &ch);
			ca_through(&a, 1000, 0);
		}
		ck_assert_msg(a.step == (fast ? CAUTO_STEP_MIN : CAUTO_RUNGS - 1), "disk %s: step %.2f",
			      fast ? "fast" : "slow", a.step);
		cauto_fini(&a);
	}
}
END_TEST

/* One thread, at the floor, on a slow disk: the chunk in eight still compressed shows
 * what it saves, and auto climbs back (at raw alone it would never see it). Only the
 * chunks auto compresses go through the compressor here, as in a snapshot. */
START_TEST(test_one_thread_climbs_back_from_the_floor)
{
	struct codec_auto a;
	struct cauto_choice ch;

	ca_text_at(&a, 1, CAUTO_STEP_MIN);
	a.disk_rate = 50e6;
	for (int i = 0; i < 300; i++) {
		ca_choose(&a, &ch);
		if (ch.codec != IMG_CODEC_NONE)
			ca_through(&a, 1000, 0);
	}
	ck_assert_msg(a.step == CAUTO_RUNGS - 1, "step %.2f", a.step);
	cauto_fini(&a);
}
END_TEST

/* Two writes in flight at once count their time once (busy no longer than from the
 * first start to the last end, where a sum would be twice that), and idle time not at
 * all; the rate is the bytes over that. */
START_TEST(test_disk_busy_union)
{
	struct codec_auto a;
	double comp, disk;
	uint64_t t0, t1, tb;

	cauto_init(&a);
	cauto_begin(&a, 2);
	t0 = mono_ns();
	cauto_io_begin(&a);
	cauto_io_begin(&a);
	ca_nap_ms(20);
	cauto_io_end(&a, 2u << 20, 20000000);
	cauto_io_end(&a, 2u << 20, 20000000);
	t1 = mono_ns();
	ca_nap_ms(50); /* idle: not counted */
	ck_assert_uint_ge(a.busy_ns, 20000000);
	ck_assert_uint_le(a.busy_ns, t1 - t0);
	cauto_rates(&a, &comp, &disk);
	ck_assert(comp == 0);
	ck_assert_msg(fabs(disk - (4u << 20) * 1e3 / (double)a.busy_ns) < 1e-6, "disk %.0f MB/s",
		      disk);
	/* Two compressions at once: they count as two threads compressing, their bytes
	 * over the union of their time as the rate. */
	tb = mono_ns();
	cauto_compress_begin(&a);
	cauto_compress_begin(&a);
	t0 = mono_ns(); /* (after the begins: the union started before it) */
	ca_nap_ms(20);
	t1 = mono_ns();
	cauto_compressed(&a, 1000000, 500000, t1 - t0, t1 - t0);
	cauto_compressed(&a, 1000000, 500000, t1 - t0, t1 - t0);
	ck_assert_uint_ge(a.comp_busy_ns, t1 - t0);
	ck_assert_uint_le(a.comp_busy_ns, mono_ns() - tb);
	cauto_rates(&a, &comp, &disk);
	ck_assert_msg(fabs(comp - 2e6 * 1e3 / (double)a.comp_busy_ns) < 1e-6, "compress %.0f MB/s",
		      comp);
	cauto_fini(&a);
}
END_TEST

/* The host's idle time as a test sets it (ns, all cores). */
static uint64_t ca_idle;

static int ca_idle_ns(uint64_t *out)
{
	*out = ca_idle;
	return 0;
}

/* A window later: @cores of the host idle through it, @cpu_ms compressing on a core. */
static void ca_window(struct codec_auto *a, double cores, double cpu_ms)
{
	uint64_t t0 = mono_ns();

	if (cpu_ms) {
		cauto_compress_begin(a);
		cauto_compressed(a, CA_LEN, CA_LEN / 2, (uint64_t)(cpu_ms * 1e6),
				 (uint64_t)(cpu_ms * 1e6));
	}
	ca_nap_ms(CAUTO_WINDOW_NS / 1000000 + 10);
	ca_idle += (uint64_t)(cores * (double)(mono_ns() - t0));
}

/* No core idle and nothing compressing, two windows in a row: the next chunks go raw,
 * without a probe, even at the top of the ladder where the writes wait; one window
 * with CAUTO_SPARE_BACK idle, and they are compressed again. The answer is carried to
 * the next snapshot. */
START_TEST(test_raw_without_spare_cpu)
{
	struct codec_auto a;
	struct cauto_choice ch;

	ca_text_at(&a, 2, CAUTO_RUNGS - 1);
	a.idle_ns = ca_idle_ns;
	ca_choose(&a, &ch); /* the window starts */
	ck_assert_int_eq(ch.codec, IMG_CODEC_ZSTD);
	ca_window(&a, 0, 0);
	ca_choose(&a, &ch);
	ck_assert_msg(!a.raw, "one window is not enough"); /* (a throttle's credit) */
	ca_window(&a, 0, 0);
	ca_choose(&a, &ch);
	ck_assert_msg(a.raw, "spare %.2f cores", a.spare);
	ck_assert_int_eq(ch.codec, IMG_CODEC_NONE);
	ck_assert(ch.probe == 1.0);
	ck_assert(a.step == CAUTO_RUNGS - 1); /* (not moved while raw) */
	cauto_end(&a);
	cauto_begin(&a, 2);
	ca_choose(&a, &ch);
	ck_assert_int_eq(ch.codec, IMG_CODEC_NONE);
	a.step = 2.0;
	ca_window(&a, (CAUTO_SPARE_BACK + CAUTO_SPARE_HIGH) / 2, 0);
	ca_choose(&a, &ch);
	ck_assert_msg(!a.raw, "spare %.2f cores", a.spare);
	ck_assert_int_eq(ch.codec, IMG_CODEC_LZ4);
	ck_assert(a.step == 2.0); /* (not a core spare: no climb) */
	cauto_fini(&a);
}
END_TEST

/* A window with a core spare says the disk held the writes back: auto climbs a rung.
 * And windows short of CPU (a throttle's banked credit making the first writes fast)
 * do not turn auto raw for the rest of that snapshot and the next; after a snapshot
 * with no such window, they do. */
START_TEST(test_spare_window_keeps_compressing)
{
	struct codec_auto a;
	struct cauto_choice ch;

	ca_text_at(&a, 2, 2.0);
	a.idle_ns = ca_idle_ns;
	ca_choose(&a, &ch);
	ca_window(&a, CAUTO_SPARE_HIGH + 0.1, 0);
	ca_choose(&a, &ch);
	ck_assert_msg(a.step == 2.0 + CAUTO_SPARE_CLIMB, "step %.2f", a.step); /* (a core idle) */
	cauto_end(&a);
	for (int snap = 0; snap < 2; snap++) {
		cauto_begin(&a, 2);
		ca_choose(&a, &ch);
		for (int w = 0; w < CAUTO_WINDOWS_AGAINST + 1; w++) {
			ca_window(&a, 0.1, 0);
			ca_choose(&a, &ch);
		}
		ck_assert_msg(a.raw == (snap == 1), "snapshot %d: raw %d", snap, a.raw);
		cauto_end(&a);
	}
	cauto_fini(&a);
}
END_TEST

/* What the compressions took on a core counts as spare: they would leave it idle.
 * Nothing idle besides, but compressing most of each window, as many windows as would
 * turn auto raw: still compressing. */
START_TEST(test_compressing_counts_as_spare)
{
	struct codec_auto a;
	struct cauto_choice ch;

	ca_text_at(&a, 2, CAUTO_RUNGS - 1);
	a.idle_ns = ca_idle_ns;
	ca_choose(&a, &ch);
	for (int w = 0; w < CAUTO_WINDOWS_AGAINST; w++) {
		ca_window(&a, 0, CAUTO_WINDOW_NS / 1e6 * (CAUTO_SPARE_MIN + 0.1));
		ca_choose(&a, &ch);
		ck_assert_msg(!a.raw, "window %d: spare %.2f cores", w, a.spare);
	}
	ck_assert_int_ne(ch.codec, IMG_CODEC_NONE);
	cauto_fini(&a);
}
END_TEST

/* The host's idle time from /proc/stat: it never goes back, and grows no faster than
 * every core idle. */
START_TEST(test_host_idle_read)
{
	uint64_t i0, i1, t0 = mono_ns(), t1;
	long cores = sysconf(_SC_NPROCESSORS_CONF);

	ck_assert_int_eq(hostcpu_idle_ns(&i0), 0);
	ca_nap_ms(50);
	ck_assert_int_eq(hostcpu_idle_ns(&i1), 0);
	t1 = mono_ns();
	ck_assert_uint_ge(i1, i0);
	/* (the kernel counts ticks: one more per core at most at either end) */
	ck_assert_uint_le(i1 - i0, (uint64_t)cores * (t1 - t0 + 2 * 10000000ull));
}
END_TEST

Suite *codec_auto_suite(void)
{
	Suite *s = suite_create("codec_auto");
	TCase *tc = tcase_create("choice");

	tcase_add_checked_fixture(tc, ca_setup, ca_teardown);
	tcase_add_test(tc, test_incompressible_raw);
	tcase_add_test(tc, test_climbs_while_disk_waits);
	tcase_add_test(tc, test_steps_down_when_compressing_is_slower);
	tcase_add_test(tc, test_settles_where_compressing_meets_writing);
	tcase_add_test(tc, test_place_mixes_rungs);
	tcase_add_test(tc, test_one_thread_weighs_saved_writes);
	tcase_add_test(tc, test_one_thread_climbs_back_from_the_floor);
	tcase_add_test(tc, test_disk_busy_union);
	tcase_add_test(tc, test_raw_without_spare_cpu);
	tcase_add_test(tc, test_spare_window_keeps_compressing);
	tcase_add_test(tc, test_host_idle_read);
	tcase_add_test(tc, test_compressing_counts_as_spare);
	suite_add_tcase(s, tc);
	return s;
}
