/*
 * test_cpufeat.c - the CPU features an image records (vmm/cpufeat.c): read from a
 * CPUID table as the platform gives one, stored and read back, refused when malformed, and
 * compared with a host's, naming what is missing.
 */
#include "suites.h"
#include "../../vmm/cpufeat.h"

#include <stdlib.h>
#include <string.h>

#define T_ENTRIES 16
#define BIT(n) (1u << (n))

/* A CPUID table like a recent x86 host's under KVM: SSE4.2, AVX, AVX2, AVX-512F, the
 * XSAVE components of AVX and AVX-512 at their standard places. */
static struct cpuid_leaf *t_table(unsigned *n)
{
	struct cpuid_leaf *c = calloc(T_ENTRIES, sizeof(*c));
	struct cpuid_leaf *e;

	ck_assert_ptr_nonnull(c);
	e = c;
	*e++ = (struct cpuid_leaf){ .function = 1, .ecx = BIT(0) | BIT(9) | BIT(19) | BIT(20) |
							   BIT(26) | BIT(28) | BIT(31),
					  .edx = BIT(25) | BIT(26) };
	*e++ = (struct cpuid_leaf){ .function = 7, .ebx = BIT(3) | BIT(5) | BIT(16) };
	*e++ = (struct cpuid_leaf){ .function = 0x80000001u, .ecx = BIT(5), .edx = BIT(29) };
	*e++ = (struct cpuid_leaf){ .function = 0xD, .index = 0, .eax = 0xe7, .ebx = 2688 };
	*e++ = (struct cpuid_leaf){ .function = 0xD, .index = 1, .eax = BIT(0) | BIT(1) };
	*e++ = (struct cpuid_leaf){ .function = 0xD, .index = 2, .eax = 256, .ebx = 576 };
	*e++ = (struct cpuid_leaf){ .function = 0xD, .index = 5, .eax = 64, .ebx = 1088 };
	*e++ = (struct cpuid_leaf){ .function = 0xD, .index = 6, .eax = 512, .ebx = 1152 };
	*e++ = (struct cpuid_leaf){ .function = 0xD, .index = 7, .eax = 1024, .ebx = 1664 };
	*n = (unsigned)(e - c);
	return c;
}

#define T_XCR0 0xe7ULL /* x87, SSE, AVX, the three AVX-512 components */

static struct cpufeat t_feat(void)
{
	unsigned n;
	struct cpuid_leaf *c = t_table(&n);
	struct cpufeat f;

	cpufeat_from_cpuid(c, n, T_XCR0, &f);
	free(c);
	return f;
}

START_TEST(test_from_cpuid)
{
	struct cpufeat f = t_feat();

	ck_assert_uint_eq(f.word[CF_7_EBX], BIT(3) | BIT(5) | BIT(16));
	ck_assert_uint_eq(f.word[CF_X1_EDX], BIT(29));
	ck_assert_uint_eq(f.word[CF_D1_EAX], 3);
	ck_assert_uint_eq(f.xcr0, T_XCR0);
	ck_assert_uint_eq(f.comp_offset[2], 576);
	ck_assert_uint_eq(f.comp_size[7], 1024);
	ck_assert_uint_eq(f.comp_size[3], 0); /* not enabled: no layout recorded */
}
END_TEST

START_TEST(test_round_trip)
{
	struct cpufeat f = t_feat(), g;
	uint8_t sec[CPUFEAT_SECTION_LEN];

	cpufeat_encode(&f, sec);
	ck_assert_int_eq(cpufeat_decode(sec, sizeof(sec), &g), 0);
	ck_assert_mem_eq(&f, &g, sizeof(f));
}
END_TEST

/* Sections no ccvm writes are refused; any byte flipped either still decodes or is
 * refused, never anything else. */
START_TEST(test_decode_refuses)
{
	struct cpufeat f = t_feat(), g;
	uint8_t sec[CPUFEAT_SECTION_LEN], bad[CPUFEAT_SECTION_LEN];
	const size_t xcr0_at = 4 + 4 * CF_WORDS, layout_at = xcr0_at + 8;

	cpufeat_encode(&f, sec);
	ck_assert_int_eq(cpufeat_decode(sec, sizeof(sec) - 1, &g), -EINVAL);
	memcpy(bad, sec, sizeof(bad));
	bad[0] = 2; /* version */
	ck_assert_int_eq(cpufeat_decode(bad, sizeof(bad), &g), -EINVAL);
	memcpy(bad, sec, sizeof(bad));
	bad[xcr0_at] &= (uint8_t)~1u; /* no x87 */
	ck_assert_int_eq(cpufeat_decode(bad, sizeof(bad), &g), -EINVAL);
	memcpy(bad, sec, sizeof(bad));
	bad[xcr0_at + 3] = 0x80; /* component 31 */
	ck_assert_int_eq(cpufeat_decode(bad, sizeof(bad), &g), -EINVAL);
	memcpy(bad, sec, sizeof(bad));
	bad[layout_at + 3 * 8] = 1; /* a size for component 3, not enabled */
	ck_assert_int_eq(cpufeat_decode(bad, sizeof(bad), &g), -EINVAL);
	memcpy(bad, sec, sizeof(bad));
	bad[layout_at + 2 * 8 + 7] = 0xff; /* AVX far beyond any XSAVE area */
	ck_assert_int_eq(cpufeat_decode(bad, sizeof(bad), &g), -EINVAL);
	for (size_t i = 0; i < sizeof(sec); i++) {
		int rc;

		memcpy(bad, sec, sizeof(bad));
		bad[i] ^= 0x5a;
		rc = cpufeat_decode(bad, sizeof(bad), &g);
		ck_assert(rc == 0 || rc == -EINVAL);
	}
}
END_TEST

/* A host with the same or more is fine; one without a feature the program may have
 * chosen code by, without an XSAVE component, or with it elsewhere is refused by name.
 * A platform bit (the hypervisor bit) is not compared. */
START_TEST(test_check)
{
	struct cpufeat need = t_feat(), host = t_feat();
	char msg[256] = "";

	ck_assert_int_eq(cpufeat_check(&need, &host, msg, sizeof(msg)), 0);
	host.word[CF_7_ECX] |= BIT(8); /* gfni: more is fine */
	host.word[CF_1_ECX] &= ~BIT(31);
	ck_assert_int_eq(cpufeat_check(&need, &host, msg, sizeof(msg)), 0);
	host.word[CF_7_EBX] &= ~BIT(5);
	ck_assert_int_eq(cpufeat_check(&need, &host, msg, sizeof(msg)), -ENOTSUP);
	ck_assert_msg(strstr(msg, "avx2"), "%s", msg);

	host = t_feat();
	need.word[CF_7_EBX] &= ~BIT(16); /* AVX-512 state saved though the bit is not */
	host.xcr0 &= ~0xe0ULL;
	ck_assert_int_eq(cpufeat_check(&need, &host, msg, sizeof(msg)), -ENOTSUP);
	ck_assert_msg(strstr(msg, "component 5 (AVX-512 opmask)"), "%s", msg);

	host = t_feat();
	host.comp_offset[2] = 832;
	ck_assert_int_eq(cpufeat_check(&need, &host, msg, sizeof(msg)), -ENOTSUP);
	ck_assert_msg(strstr(msg, "AVX") && strstr(msg, "832") && strstr(msg, "576"), "%s", msg);
}
END_TEST

Suite *cpufeat_suite(void)
{
	Suite *s = suite_create("cpufeat");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_from_cpuid);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_decode_refuses);
	tcase_add_test(tc, test_check);
	suite_add_tcase(s, tc);
	return s;
}
