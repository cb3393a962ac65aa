/*
 * test_cpu_tables.c - the GDT, IDT, TSS and stubs the vCPU depends on.
 */
#include "suites.h"
#include "../../mmu/layout.h"
#include "../../vmm/cpu_tables.h"
#include "../../vmm/x86.h"

#include <stdlib.h>
#include <string.h>

static uint8_t *ram;

static void setup(void)
{
	ram = calloc(1, LAYOUT_USER_BASE);
	ck_assert_ptr_nonnull(ram);
	cpu_tables_build(ram);
}

static void teardown(void)
{
	free(ram);
}

/* Every exception vector's IDT gate points at its own stub, through the kernel CS. */
START_TEST(test_idt_gates)
{
	for (int v = 0; v < X86_NR_EXCEPTIONS; v++) {
		uint64_t lo, hi, off;

		memcpy(&lo, ram + LAYOUT_IDT + 16 * v, 8);
		memcpy(&hi, ram + LAYOUT_IDT + 16 * v + 8, 8);
		off = (lo & 0xFFFF) | (((lo >> 48) & 0xFFFF) << 16) | (hi << 32);
		ck_assert_uint_eq(off, STUB_EXC(v));
		ck_assert_uint_eq((lo >> 16) & 0xFFFF, GDT_KERNEL_CS);
		ck_assert_msg((lo >> 47) & 1, "gate %d not present", v);
		ck_assert_int_eq(cpu_stub_at(STUB_EXC(v)), v);
		ck_assert_int_eq(cpu_stub_at(STUB_EXC(v) + 2), v);
	}
}
END_TEST

/* Each stub is `out %al, $STUB_PORT` followed by hlt; only exact stub addresses count. */
START_TEST(test_stubs)
{
	const uint8_t *s = ram + STUB_SYSCALL;

	ck_assert_uint_eq(s[0], 0xE6);
	ck_assert_uint_eq(s[1], STUB_PORT);
	ck_assert_uint_eq(s[2], 0xF4);
	ck_assert_int_eq(cpu_stub_at(STUB_SYSCALL), -1);
	ck_assert_int_eq(cpu_stub_at(STUB_SYSCALL + 1), -2);
	ck_assert_int_eq(cpu_stub_at(STUB_SYSCALL + 3), -2);
	ck_assert_int_eq(cpu_stub_at(LAYOUT_USER_BASE), -2);
	ck_assert_int_eq(cpu_stub_at(0), -2);
}
END_TEST

/* The TSS switches exceptions to our stack and lets only the stub port through. */
START_TEST(test_tss)
{
	const uint8_t *tss = ram + LAYOUT_TSS;
	uint64_t rsp0;
	uint16_t iopb;

	memcpy(&rsp0, tss + 4, 8);
	memcpy(&iopb, tss + 102, 2);
	ck_assert_uint_eq(rsp0, LAYOUT_KSTACK_TOP);
	ck_assert_uint_eq(iopb, TSS_SIZE);
	for (unsigned port = 0; port < 65536; port++) {
		int denied = (tss[iopb + port / 8] >> (port % 8)) & 1;

		ck_assert_msg(denied == (port != STUB_PORT), "port %#x denied=%d", port, denied);
	}
	ck_assert_uint_eq(tss[iopb + 8192], 0xFF);
}
END_TEST

Suite *cpu_tables_suite(void)
{
	Suite *s = suite_create("cpu_tables");
	TCase *tc = tcase_create("tables");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_idt_gates);
	tcase_add_test(tc, test_stubs);
	tcase_add_test(tc, test_tss);
	suite_add_tcase(s, tc);
	return s;
}
