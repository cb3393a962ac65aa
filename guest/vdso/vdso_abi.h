/*
 * vdso_abi.h - the data page shared by the monitor (writer) and the vDSO (reader).
 *
 * The page sits one page below the vDSO image in guest memory. Time is computed from
 * the TSC the guest reads with rdtsc: ns = base_ns + ((tsc - tsc_base) * mult) >> shift.
 * Monotonic time is a pure function of the TSC (so it never steps back); realtime and
 * boottime add offsets the monitor refreshes under a sequence counter (odd = writing).
 *
 * The page below it holds counters the vDSO bumps and the monitor only reads: how
 * often the guest read the clock, a measure of how much work it got done that needs no
 * VM exit (mmu/tracker.c times its measuring windows by it).
 */
#ifndef CCVM_VDSO_ABI_H
#define CCVM_VDSO_ABI_H

#include <stdint.h>

#define VDSO_DATA_MAGIC 0x63637664736f3031ULL /* "ccvdso01" */

struct vdso_data {
	uint64_t magic;
	volatile uint32_t seq;
	uint32_t shift;
	uint64_t tsc_base;       /* guest TSC at monotonic time mono_base_ns */
	uint64_t mono_base_ns;
	uint64_t mult;
	int64_t realtime_off_ns; /* CLOCK_REALTIME - CLOCK_MONOTONIC */
	int64_t boottime_off_ns; /* CLOCK_BOOTTIME - CLOCK_MONOTONIC */
	uint64_t coarse_res_ns;
};

struct vdso_counters {
	uint64_t clock_reads;    /* clock_gettime, gettimeofday and time calls answered */
};

#endif
