/*
 * stats.h - counters of VM exits by reason, kept per VM with relaxed atomics.
 */
#ifndef CCVM_STATS_H
#define CCVM_STATS_H

#include <stdint.h>

enum exit_kind {
	EXIT_SYSCALL,   /* the syscall stub: a guest system call */
	EXIT_EXCEPTION, /* an exception stub: a guest fault */
	EXIT_KICK,      /* a run cut short by the monitor (pause, stop, a signal) */
	EXIT_IO_OTHER,  /* port I/O that is not from our stubs */
	EXIT_MMIO,
	EXIT_HLT,
	EXIT_SHUTDOWN,  /* triple fault */
	EXIT_INTERNAL,  /* KVM internal error / emulation failure */
	EXIT_FAIL_ENTRY,
	EXIT_OTHER,
	EXIT_NR
};

struct vm_stats {
	uint64_t exits[EXIT_NR];
	/* Processes (docs/processes.md): write faults on blocks shared after a fork,
	 * first touches of blocks a lazy space had not backed yet (mmu/aspace.h), vCPUs
	 * kicked off old page tables, and times KVM was made to forget them. */
	uint64_t cow_faults, touch_faults, flushes, recycles;
};

const char *stats_exit_name(enum exit_kind kind);

static inline void stats_count(uint64_t *counter)
{
	__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

static inline uint64_t stats_read(const uint64_t *counter)
{
	return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

#endif
