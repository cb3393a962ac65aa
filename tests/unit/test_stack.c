/*
 * test_stack.c - the initial process stack reads back as the ABI describes it.
 */
#include "suites.h"
#include "../../vmm/linux/stack.h"

#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define TOP  0x800000ULL
#define SIZE 0x10000ULL

static uint8_t buf[SIZE];

static uint64_t rd(uint64_t gva)
{
	uint64_t v;

	memcpy(&v, buf + (gva - (TOP - SIZE)), 8);
	return v;
}

static const char *str(uint64_t gva)
{
	return (const char *)buf + (gva - (TOP - SIZE));
}

/* argc, argv, envp, auxv and strings are where a libc looks for them, 16-byte aligned. */
START_TEST(test_layout)
{
	char *argv[] = { "prog", "one", "two words" };
	char *envp[] = { "A=1", "PATH=/bin" };
	struct stack_args a = { .argc = 3, .argv = argv, .envc = 2, .envp = envp,
				.execfn = "/bin/prog", .platform = "x86_64",
				.random = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 } };
	uint64_t rsp, p, random_at = 0;
	int n_aux = 0;
	bool saw_execfn = false;

	a.auxv[a.n_auxv++] = (struct stack_auxv){ AT_PAGESZ, 4096 };
	a.auxv[a.n_auxv++] = (struct stack_auxv){ AT_ENTRY, 0x401000 };
	ck_assert_int_eq(stack_build(buf, TOP, SIZE, &a, &rsp), 0);
	ck_assert_msg(rsp % 16 == 0, "rsp %#llx not 16-byte aligned", (unsigned long long)rsp);
	ck_assert_uint_eq(rd(rsp), 3);
	ck_assert_str_eq(str(rd(rsp + 8)), "prog");
	ck_assert_str_eq(str(rd(rsp + 16)), "one");
	ck_assert_str_eq(str(rd(rsp + 24)), "two words");
	ck_assert_uint_eq(rd(rsp + 32), 0);
	ck_assert_str_eq(str(rd(rsp + 40)), "A=1");
	ck_assert_str_eq(str(rd(rsp + 48)), "PATH=/bin");
	ck_assert_uint_eq(rd(rsp + 56), 0);
	for (p = rsp + 64; rd(p) != AT_NULL; p += 16, n_aux++) {
		if (rd(p) == AT_PAGESZ)
			ck_assert_uint_eq(rd(p + 8), 4096);
		if (rd(p) == AT_RANDOM)
			random_at = rd(p + 8);
		if (rd(p) == AT_EXECFN) {
			ck_assert_str_eq(str(rd(p + 8)), "/bin/prog");
			saw_execfn = true;
		}
		if (rd(p) == AT_PLATFORM)
			ck_assert_str_eq(str(rd(p + 8)), "x86_64");
	}
	ck_assert_int_eq(n_aux, 5);
	ck_assert(saw_execfn);
	ck_assert_msg(random_at && memcmp(str(random_at), a.random, 16) == 0, "AT_RANDOM bytes");
	ck_assert_msg(p + 16 <= TOP, "auxv runs past the top");
}
END_TEST

/* Arguments that do not fit are refused, not written past the buffer. */
START_TEST(test_too_big)
{
	static char big[70000];
	char *argv[] = { big };
	struct stack_args a = { .argc = 1, .argv = argv, .execfn = "x", .platform = "x86_64" };
	uint64_t rsp;

	memset(big, 'a', sizeof(big) - 1);
	ck_assert_int_eq(stack_build(buf, TOP, SIZE, &a, &rsp), -E2BIG);
}
END_TEST

Suite *stack_suite(void)
{
	Suite *s = suite_create("stack");
	TCase *tc = tcase_create("build");

	tcase_add_test(tc, test_layout);
	tcase_add_test(tc, test_too_big);
	suite_add_tcase(s, tc);
	return s;
}
