/*
 * test_cpu_tables.c - the GDT, IDT, TSS and stubs the vCPU depends on.
 */
#include "suites.h"
#include "../../mmu/layout.h"
#include "../../mmu/cpu_tables.h"
#include "../../vmm/vm.h"
#include "../../base/x86.h"

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

/* vCPU @id's TSS: RSP0 at the top of its own stack, and the shared bitmap, which lets
 * only the stub port through. */
static void check_tss(int id)
{
	const uint8_t *tss = ram + cpu_tss_base(id), *bitmap;
	uint64_t rsp0;
	uint16_t iopb;

	memcpy(&rsp0, tss + 4, 8);
	memcpy(&iopb, tss + 102, 2);
	ck_assert_uint_eq(rsp0, cpu_kstack_top(id));
	ck_assert_uint_eq(cpu_tss_base(id) + iopb, LAYOUT_IOPB);
	ck_assert_uint_eq(cpu_tss_limit(id), (uint32_t)iopb + TSS_IOPB_SIZE);
	bitmap = tss + iopb;
	for (unsigned port = 0; port < 65536; port++) {
		int denied = (bitmap[port / 8] >> (port % 8)) & 1;

		ck_assert_msg(denied == (port != STUB_PORT), "vCPU %d: port %#x denied=%d", id,
			      port, denied);
	}
	ck_assert_uint_eq(bitmap[8192], 0xFF);
}

/* The TSS switches exceptions to our stack and lets only the stub port through. */
START_TEST(test_tss)
{
	check_tss(0);
	check_tss(VM_MAX_VCPUS - 1);
}
END_TEST

/* G7: each vCPU has a TSS and an exception stack of its own, inside the system area and
 * apart from every other vCPU's, so a fault on one cannot overwrite the frame another
 * has yet to report. */
START_TEST(test_exception_stack_per_vcpu)
{
	for (int a = 0; a < VM_MAX_VCPUS; a++) {
		uint64_t top = cpu_kstack_top(a);

		ck_assert_uint_ge(top - LAYOUT_KSTACK_SIZE, LAYOUT_KSTACK_LOW);
		ck_assert_uint_le(top, LAYOUT_KSTACK_TOP);
		ck_assert_uint_le(cpu_tss_base(a) + TSS_SIZE, LAYOUT_IOPB);
		for (int b = 0; b < a; b++) {
			ck_assert_msg(cpu_kstack_top(b) <= top - LAYOUT_KSTACK_SIZE,
				      "stacks of vCPUs %d and %d overlap", b, a);
			ck_assert_uint_ge(cpu_tss_base(a), cpu_tss_base(b) + TSS_SIZE);
		}
		memcpy(&top, ram + cpu_tss_base(a) + 4, 8);
		ck_assert_uint_eq(top, cpu_kstack_top(a));
	}
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
	tcase_add_test(tc, test_exception_stack_per_vcpu);
	suite_add_tcase(s, tc);
	return s;
}
