/*
 * cpu_tables.c - the CPU tables a CPL3-only guest still needs.
 *
 * Even though the guest never runs kernel code, the CPU needs a GDT for the
 * selectors it loads on a syscall or an exception, an IDT to deliver exceptions, and
 * a 64-bit TSS for the stack it switches to when leaving CPL3 (without a TSS an
 * exception at CPL3 is a triple fault). Every IDT entry and LSTAR point at a stub
 * whose first instruction is `out` to STUB_PORT: the VM exits to the monitor, which
 * identifies the stub by RIP and never lets the CPU run the next instruction (a `hlt`
 * follows each `out`, just in case). The TSS I/O bitmap denies every port but
 * STUB_PORT: an `out` anywhere else at CPL3 is a #GP, and the monitor accepts the
 * port only at a stub's address (see layout.h for why the syscall stub runs at CPL3).
 */
#include "cpu_tables.h"
#include "../base/x86.h"
#include "layout.h"

#include <string.h>

#define DESC_P    0x80
#define DESC_S    0x10 /* code or data (not system) */
#define DESC_DPL3 0x60
#define DESC_CODE 0x0A /* execute/read */
#define DESC_DATA 0x02 /* read/write */
#define DESC_FLAG_G 0x8
#define DESC_FLAG_DB 0x4
#define DESC_FLAG_L 0x2

#define OP_OUT_IMM8_AL 0xE6
#define OP_HLT         0xF4
#define STUB_OUT_LEN   2 /* bytes of `out %al, $imm8` */

static uint64_t gdt_seg(uint8_t access, uint8_t flags)
{
	const uint64_t limit = 0xFFFFF;

	return (limit & 0xFFFF) | ((uint64_t)access << 40) | (((limit >> 16) & 0xF) << 48) |
	       ((uint64_t)flags << 52);
}

_Static_assert(LAYOUT_TSS + LAYOUT_MAX_VCPUS * LAYOUT_TSS_STRIDE <= LAYOUT_IOPB &&
	       LAYOUT_IOPB + TSS_IOPB_SIZE + 1 <= LAYOUT_KSTACK_LOW &&
	       LAYOUT_KSTACK_LOW + LAYOUT_MAX_VCPUS * LAYOUT_KSTACK_SIZE <= LAYOUT_KSTACK_TOP &&
	       LAYOUT_IOPB + TSS_IOPB_SIZE - LAYOUT_TSS <= 0xFFFF,
	       "the TSSes, their bitmap and the exception stacks fit the system area");

uint64_t cpu_tss_base(int id)
{
	return LAYOUT_TSS + (uint64_t)id * LAYOUT_TSS_STRIDE;
}

uint32_t cpu_tss_limit(int id)
{
	return (uint32_t)(LAYOUT_IOPB + TSS_IOPB_SIZE - cpu_tss_base(id));
}

uint64_t cpu_kstack_top(int id)
{
	return LAYOUT_KSTACK_LOW + (uint64_t)(id + 1) * LAYOUT_KSTACK_SIZE;
}

/* The descriptor LTR would load: vCPU 0's (each vCPU's TR is set directly). */
static void gdt_build(uint64_t *gdt)
{
	uint64_t base = cpu_tss_base(0), limit = cpu_tss_limit(0);

	memset(gdt, 0, 10 * 8);
	gdt[GDT_KERNEL_CS / 8] = gdt_seg(DESC_P | DESC_S | DESC_CODE, DESC_FLAG_G | DESC_FLAG_L);
	gdt[GDT_KERNEL_DS / 8] = gdt_seg(DESC_P | DESC_S | DESC_DATA, DESC_FLAG_G | DESC_FLAG_DB);
	gdt[GDT_USER_CS32 / 8] =
		gdt_seg(DESC_P | DESC_S | DESC_DPL3 | DESC_CODE, DESC_FLAG_G | DESC_FLAG_DB);
	gdt[GDT_USER_DS / 8] =
		gdt_seg(DESC_P | DESC_S | DESC_DPL3 | DESC_DATA, DESC_FLAG_G | DESC_FLAG_DB);
	gdt[GDT_USER_CS / 8] =
		gdt_seg(DESC_P | DESC_S | DESC_DPL3 | DESC_CODE, DESC_FLAG_G | DESC_FLAG_L);
	/* 64-bit TSS descriptor: two slots. */
	gdt[GDT_TSS / 8] = (limit & 0xFFFF) | ((base & 0xFFFFFF) << 16) |
			   ((uint64_t)(DESC_P | SEG_TYPE_TSS_AVAIL) << 40) |
			   (((limit >> 16) & 0xF) << 48) | (((base >> 24) & 0xFF) << 56);
	gdt[GDT_TSS / 8 + 1] = base >> 32;
}

static void idt_build(uint64_t *idt)
{
	memset(idt, 0, 32 * 16);
	for (unsigned v = 0; v < X86_NR_EXCEPTIONS; v++) {
		uint64_t off = STUB_EXC(v);
		/* int3 and into are allowed from CPL3, as on Linux: they report as traps
		 * rather than as #GP. */
		uint64_t dpl = (v == X86_BP || v == X86_OF) ? 3 : 0;
		uint64_t attr = 0x80 | (dpl << 5) | GATE_TYPE_INTR;

		idt[2 * v] = (off & 0xFFFF) | ((uint64_t)GDT_KERNEL_CS << 16) | (attr << 40) |
			     (((off >> 16) & 0xFFFF) << 48);
		idt[2 * v + 1] = off >> 32;
	}
}

/* One TSS per vCPU, each with its own RSP0, all naming one I/O bitmap after them. */
static void tss_build(uint8_t *ram)
{
	uint8_t *iopb = ram + LAYOUT_IOPB;

	for (int id = 0; id < LAYOUT_MAX_VCPUS; id++) {
		uint8_t *tss = ram + cpu_tss_base(id);
		uint64_t rsp0 = cpu_kstack_top(id);
		uint16_t off = (uint16_t)(LAYOUT_IOPB - cpu_tss_base(id));

		memset(tss, 0, LAYOUT_TSS_STRIDE);
		memcpy(tss + 4, &rsp0, sizeof(rsp0));
		memcpy(tss + 102, &off, sizeof(off));
	}
	/* All ones: every port denied at CPL3, plus the terminating byte; but the stub
	 * port, which the syscall stub uses at CPL3 on PVM hosts. */
	memset(iopb, 0xFF, TSS_IOPB_SIZE + 1);
	iopb[STUB_PORT / 8] &= (uint8_t)~(1U << (STUB_PORT % 8));
}

static void stub_write(uint8_t *p)
{
	p[0] = OP_OUT_IMM8_AL;
	p[1] = STUB_PORT;
	p[2] = OP_HLT;
}

void cpu_tables_build(uint8_t *ram)
{
	gdt_build((uint64_t *)(void *)(ram + LAYOUT_GDT));
	idt_build((uint64_t *)(void *)(ram + LAYOUT_IDT));
	tss_build(ram);
	memset(ram + LAYOUT_STUBS, OP_HLT, PAGE_SIZE);
	stub_write(ram + STUB_SYSCALL);
	for (unsigned v = 0; v < X86_NR_EXCEPTIONS; v++)
		stub_write(ram + STUB_EXC(v));
}

int cpu_stub_at(uint64_t rip)
{
	uint64_t slot, off;

	if (rip < LAYOUT_STUBS || rip >= LAYOUT_STUBS + STUB_STRIDE * STUB_COUNT)
		return -2;
	/* KVM reports the `out` itself; the nested PVM host reports the instruction after
	 * it (the port I/O already completed). Accept exactly those two. */
	off = (rip - LAYOUT_STUBS) % STUB_STRIDE;
	if (off != 0 && off != STUB_OUT_LEN)
		return -2;
	slot = (rip - LAYOUT_STUBS) / STUB_STRIDE;
	return slot == 0 ? -1 : (int)slot - 1;
}
