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

Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	TCase *tc = tcase_create("sizes");

	tcase_add_test(tc, test_sizes);
	tcase_add_test(tc, test_bad_sizes);
	suite_add_tcase(s, tc);
	return s;
}
