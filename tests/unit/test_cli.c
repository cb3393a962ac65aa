/*
 * test_cli.c - option values: sizes with suffixes, and what is refused.
 */
#include "suites.h"
#include "../../vmm/cli.h"

#include <errno.h>

/* Suffixes K, M, G (and KiB/MB spellings) scale by powers of 1024. */
START_TEST(test_sizes)
{
	uint64_t v;

	ck_assert_int_eq(cli_parse_size("4096", &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(cli_parse_size("512M", &v), 0);
	ck_assert_uint_eq(v, 512ULL << 20);
	ck_assert_int_eq(cli_parse_size("1G", &v), 0);
	ck_assert_uint_eq(v, 1ULL << 30);
	ck_assert_int_eq(cli_parse_size("2GiB", &v), 0);
	ck_assert_uint_eq(v, 2ULL << 30);
	ck_assert_int_eq(cli_parse_size("64k", &v), 0);
	ck_assert_uint_eq(v, 64ULL << 10);
	ck_assert_int_eq(cli_parse_size("0", &v), 0);
	ck_assert_uint_eq(v, 0);
}
END_TEST

/* No digits, unknown suffix, negative, overflow: all refused. */
START_TEST(test_bad_sizes)
{
	uint64_t v;
	const char *bad[] = { "", "G", "-1G", "1X", "1GG", "1.5G", "99999999999999999999",
			      "20000000000G", " 1G" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(cli_parse_size(bad[i], &v) == -EINVAL, "'%s' accepted", bad[i]);
	ck_assert_int_eq(cli_parse_size(NULL, &v), -EINVAL);
}
END_TEST

/* Real-number options: finite and in range, the whole string; NaN, infinities, huge
 * values and trailing text refused (F11: `--snapshot-rate inf`, `--threshold nan`). */
START_TEST(test_reals)
{
	const char *bad[] = { "", "nan", "NaN", "inf", "-inf", "1e300", "1e999", "-0.5", "1.5",
			      "0.5x", " ", "0x" };
	double v = -1;

	ck_assert_int_eq(cli_parse_real("0.8", 0, 1, &v), 0);
	ck_assert(v == 0.8);
	ck_assert_int_eq(cli_parse_real("0", 0, 1, &v), 0);
	ck_assert_int_eq(cli_parse_real("1", 0, 1, &v), 0);
	ck_assert(v == 1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(cli_parse_real(bad[i], 0, 1, &v) == -EINVAL, "'%s' accepted", bad[i]);
	ck_assert_int_eq(cli_parse_real(NULL, 0, 1, &v), -EINVAL);
	ck_assert(cli_real_ok(1e6, 0, CLI_MAX_RATE_MBS));
	ck_assert(!cli_real_ok(1e300, 0, CLI_MAX_RATE_MBS));
	ck_assert(!cli_real_ok(__builtin_nan(""), 0, 1));
	ck_assert(!cli_real_ok(__builtin_inf(), 0, __builtin_inf()));
}
END_TEST

Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	TCase *tc = tcase_create("sizes");

	tcase_add_test(tc, test_sizes);
	tcase_add_test(tc, test_bad_sizes);
	tcase_add_test(tc, test_reals);
	suite_add_tcase(s, tc);
	return s;
}
