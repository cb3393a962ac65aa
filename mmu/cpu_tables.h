/*
 * cpu_tables.h - GDT, IDT, TSS and CPL0 trap stubs written into the system area.
 */
#ifndef CCVM_CPU_TABLES_H
#define CCVM_CPU_TABLES_H

#include <stdint.h>

#define TSS_SIZE      104
#define TSS_IOPB_SIZE 8192 /* one bit per port, 65536 ports */
/* Before per-vCPU TSSes (images saved then name it): one TSS, its bitmap after it. */
#define TSS_LIMIT_V1  (TSS_SIZE + TSS_IOPB_SIZE) /* last byte: the 0xff terminator */
#define IDT_LIMIT     (32 * 16 - 1)
#define GDT_LIMIT     (10 * 8 - 1)

/* Write the GDT, IDT, TSS (its I/O bitmap denies every port but STUB_PORT) and the
 * trap stubs into guest RAM whose host address is @ram. */
void cpu_tables_build(uint8_t *ram);

/* vCPU @id's TSS: its base, its limit (up to the shared bitmap's terminator), and the
 * top of its exception stack (TSS.RSP0). @id < LAYOUT_MAX_VCPUS. */
uint64_t cpu_tss_base(int id);
uint32_t cpu_tss_limit(int id);
uint64_t cpu_kstack_top(int id);

/* Which stub a guest RIP is at (the `out` or just after it): -1 for the syscall
 * stub, the vector for an exception stub, -2 when RIP is at no stub. */
int cpu_stub_at(uint64_t rip);

#endif
