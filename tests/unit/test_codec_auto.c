/*
 * test_codec_auto.c - `--compress auto`'s choice (snapshot/codec_auto.c): raw for data
 * that does not shrink, a codec that stores less when the disk is the bottleneck, raw
 * when compressing would be, the rungs tried in turn, and the disk's and the
 * compressors' busy time counted once when they overlap.
 */
#include "suites.h"
#include "../../snapshot/codec_auto.h"
#include "../../vmm/base/mono.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* @a fresh, for a snapshot on @threads threads to a disk of @disk bytes/s, and the
 * chunk text. */
static void ca_text_to(struct codec_auto *a, int threads, double disk)
{
	cauto_init(a);
	ca_text();
	cauto_begin(a, threads);
	a->disk_rate = disk;
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
	a.disk_rate = 50e6; /* even on a slow disk: nothing to gain */
	ca_random();
	ca_choose(&a, &ch);
	ck_assert_int_eq(ch.codec, IMG_CODEC_NONE);
	ck_assert(ch.probe > 1.0 - CAUTO_PROBE_GAIN);
	cauto_fini(&a);
}
END_TEST

/* Text on a slow disk: zstd, whose smaller output the disk waits less for; on a disk
 * far faster than the compressors: raw; in between, with cores to spare: LZ4. */
START_TEST(test_disk_against_compressors)
{
	struct codec_auto a;
	struct cauto_choice ch;

	ca_text_to(&a, 2, 100e6);
	ca_choose(&a, &ch);
	ck_assert_int_eq(ch.codec, IMG_CODEC_ZSTD);
	ck_assert_int_ge(ch.level, 1);
	ck_assert(ch.probe < 0.7);
	a.disk_rate = 50e9;
	ca_choose(&a, &ch);
	ck_assert_int_eq(ch.codec, IMG_CODEC_NONE);
	a.disk_rate = 1e9;
	ca_choose(&a, &ch);
	ck_assert_int_eq(ch.codec, IMG_CODEC_LZ4);
	cauto_fini(&a);
}
END_TEST

/* A rung measured slow (its thread shared a core) is no longer chosen, yet every
 * CAUTO_EXPLORE-th chunk tries the codecs in turn, so each is measured again. */
START_TEST(test_measured_and_explored)
{
	struct codec_auto a;
	struct cauto_choice ch;
	int tried[CAUTO_RUNGS] = { 0 };

	ca_text_to(&a, 1, 1e9);
	ca_choose(&a, &ch);
	ck_assert_int_eq(ch.codec, IMG_CODEC_LZ4);
	for (int i = 0; i < 8; i++) /* LZ4 at 100 MB/s: slower than the disk takes raw */
		cauto_compressed(&a, IMG_CODEC_LZ4, 1, ch.probe, CA_LEN, CA_LEN / 2,
				 CA_LEN * 10ull);
	ca_choose(&a, &ch);
	ck_assert_int_ne(ch.codec, IMG_CODEC_LZ4);
	for (int i = 0; i < 4 * CAUTO_EXPLORE; i++) {
		ca_choose(&a, &ch);
		tried[ch.rung]++;
	}
	for (int k = 1; k < CAUTO_RUNGS; k++)
		ck_assert_msg(tried[k] > 0, "rung %d never tried", k);
	cauto_fini(&a);
}
END_TEST

static void ca_nap_ms(long ms)
{
	struct timespec ts = { .tv_nsec = ms * 1000000L };

	nanosleep(&ts, NULL);
}

/* Two writes in flight at once count their time once (busy no longer than from the
 * first start to the last end, where a sum would be twice that), and idle time not at
 * all; the rate is the bytes over that. */
START_TEST(test_disk_busy_union)
{
	struct codec_auto a;
	double comp, disk;
	uint64_t t0, t1;

	cauto_init(&a);
	cauto_begin(&a, 2);
	t0 = mono_ns();
	cauto_io_begin(&a);
	cauto_io_begin(&a);
	ca_nap_ms(20);
	cauto_io_end(&a, 2u << 20);
	cauto_io_end(&a, 2u << 20);
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
	t0 = mono_ns();
	cauto_compress_begin(&a);
	cauto_compress_begin(&a);
	ca_nap_ms(20);
	t1 = mono_ns();
	cauto_compressed(&a, IMG_CODEC_ZSTD, 7, 0, 1000000, 500000, t1 - t0);
	cauto_compressed(&a, IMG_CODEC_ZSTD, 7, 0, 1000000, 500000, t1 - t0);
	ck_assert_uint_ge(a.comp_busy_ns, t1 - t0);
	ck_assert_uint_le(a.comp_busy_ns, mono_ns() - t0);
	ck_assert_msg(a.parallel > 1.0 && a.parallel <= 2.0, "parallel %.2f", a.parallel);
	cauto_rates(&a, &comp, &disk);
	ck_assert_msg(fabs(comp - 2e6 * 1e3 / (double)a.comp_busy_ns) < 1e-6, "compress %.0f MB/s",
		      comp);
	cauto_fini(&a);
}
END_TEST

Suite *codec_auto_suite(void)
{
	Suite *s = suite_create("codec_auto");
	TCase *tc = tcase_create("choice");

	tcase_add_checked_fixture(tc, ca_setup, ca_teardown);
	tcase_add_test(tc, test_incompressible_raw);
	tcase_add_test(tc, test_disk_against_compressors);
	tcase_add_test(tc, test_measured_and_explored);
	tcase_add_test(tc, test_disk_busy_union);
	suite_add_tcase(s, tc);
	return s;
}
