/*
 * layout.h - where things live in guest memory.
 *
 * Guest virtual addresses equal guest physical addresses (identity map, 2 MiB pages).
 *
 *   0 .. 2 MiB    system area: GDT, IDT, a TSS and an exception stack per vCPU (so
 *                 a fault on one never lands on a frame another vCPU is still to
 *                 report), the I/O bitmap they share, page tables.
 *                 Supervisor-only: CPL3 can neither read nor write it, and a NULL
 *                 dereference faults.
 *   2 .. 4 MiB    stub area: the trap stubs, user read-only. On our PVM hosts a
 *                 `syscall` jumps to LSTAR without leaving CPL3, so the syscall stub
 *                 must be user-executable; its `out` port is the one port the TSS I/O
 *                 bitmap lets through, and the monitor accepts that exit only at the
 *                 stub's own address. Exception stubs run at CPL0 as usual.
 *   4 MiB .. end  user memory (non-PIE x86-64 programs are linked at 4 MiB).
 */
#ifndef CCVM_LAYOUT_H
#define CCVM_LAYOUT_H

#include "../base/pages.h"


#define LAYOUT_GDT        0x1000ULL
#define LAYOUT_IDT        0x2000ULL
#define LAYOUT_TSS        0x3000ULL /* vCPU i's 104-byte TSS at + i * LAYOUT_TSS_STRIDE */
#define LAYOUT_TSS_STRIDE 128ULL
#define LAYOUT_IOPB       0x5000ULL /* the I/O bitmap every TSS names: 8 KiB + 1 */
#define LAYOUT_KSTACK_LOW 0x8000ULL
#define LAYOUT_KSTACK_TOP 0x10000ULL /* vCPU i's TSS.RSP0: LOW + (i + 1) * SIZE */
#define LAYOUT_KSTACK_SIZE 512ULL   /* an exception frame is 48 bytes */
#define LAYOUT_MAX_VCPUS  64        /* TSSes and stacks there are room for */
#define LAYOUT_PGTABLE    0x10000ULL /* PML4, PDPT, then one PD per GiB of RAM */
#define LAYOUT_SYS_END    0x200000ULL
#define LAYOUT_STUB_AREA  0x200000ULL
#define LAYOUT_STUBS      LAYOUT_STUB_AREA /* one page of stubs */
#define LAYOUT_USER_BASE  0x400000ULL

/* Page-table pages available above LAYOUT_PGTABLE: bounds the RAM size. */
#define LAYOUT_PGTABLE_PAGES ((LAYOUT_SYS_END - LAYOUT_PGTABLE) / PAGE_SIZE)

/* Largest guest RAM ccvm accepts (well inside what the page-table area can map). */
#define LAYOUT_MAX_RAM (256ULL << 30)
/* Smallest: the system area, a program, its stack and the vDSO must fit. */
#define LAYOUT_MIN_RAM (16ULL << 20)

/* Trap stubs: one out instruction each, at a fixed stride. The syscall stub is slot
 * 0; exception vector v is slot v + 1. */
#define STUB_PORT        0xE0
#define STUB_STRIDE      8
#define STUB_SYSCALL     LAYOUT_STUBS
#define STUB_EXC(v)      (LAYOUT_STUBS + STUB_STRIDE * (1ULL + (v)))
#define STUB_COUNT       33

#endif
