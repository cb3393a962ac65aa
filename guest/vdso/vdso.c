/*
 * vdso.c - the virtual dynamic shared object mapped into every ccvm guest.
 *
 * glibc and musl look up __vdso_clock_gettime and friends (version LINUX_2.6) through
 * AT_SYSINFO_EHDR and call them instead of making a system call. In ccvm a system call
 * is a VM exit (~40 us), so these read the TSC and the monitor's data page instead and
 * never leave the guest. Clocks the page cannot answer fall back to the real syscall.
 * Built freestanding and position independent; it must not use any library.
 */
#include "vdso_abi.h"

#include <stddef.h>

#define CLOCK_REALTIME           0
#define CLOCK_MONOTONIC          1
#define CLOCK_MONOTONIC_RAW      4
#define CLOCK_REALTIME_COARSE    5
#define CLOCK_MONOTONIC_COARSE   6
#define CLOCK_BOOTTIME           7
#define NSEC_PER_SEC             1000000000LL
#define NR_GETTIMEOFDAY          96
#define NR_TIME                  201
#define NR_CLOCK_GETTIME         228
#define NR_CLOCK_GETRES          229

struct vdso_timespec {
	long tv_sec;
	long tv_nsec;
};

struct vdso_timeval {
	long tv_sec;
	long tv_usec;
};

/* Defined by the linker script: the page below the image. */
extern const struct vdso_data ccvm_vdso_data __attribute__((visibility("hidden")));
extern struct vdso_counters ccvm_vdso_counters __attribute__((visibility("hidden")));

static long vdso_syscall2(long nr, long a, long b)
{
	long ret;

	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b) : "rcx", "r11", "memory");
	return ret;
}

static inline uint64_t vdso_rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}

/* One more clock read. A plain load and store, not a locked add: two threads racing
 * lose a count, which a measure of progress can afford, and a read stays cheap. */
static inline void vdso_count_read(void)
{
	uint64_t n = __atomic_load_n(&ccvm_vdso_counters.clock_reads, __ATOMIC_RELAXED);

	__atomic_store_n(&ccvm_vdso_counters.clock_reads, n + 1, __ATOMIC_RELAXED);
}

/* Monotonic nanoseconds plus the realtime/boottime offsets, read consistently. */
static uint64_t vdso_read(int64_t *real_off, int64_t *boot_off)
{
	const volatile struct vdso_data *d = &ccvm_vdso_data;
	uint32_t seq;
	uint64_t ns;

	vdso_count_read();
	do {
		seq = d->seq;
		__asm__ volatile("" ::: "memory");
		uint64_t tsc = vdso_rdtsc();
		uint64_t delta = tsc > d->tsc_base ? tsc - d->tsc_base : 0;

		ns = d->mono_base_ns + (uint64_t)(((unsigned __int128)delta * d->mult) >> d->shift);
		*real_off = d->realtime_off_ns;
		*boot_off = d->boottime_off_ns;
		__asm__ volatile("" ::: "memory");
	} while ((seq & 1) || seq != d->seq);
	return ns;
}

static void vdso_ns_to_ts(int64_t ns, struct vdso_timespec *ts)
{
	ts->tv_sec = ns / NSEC_PER_SEC;
	ts->tv_nsec = ns % NSEC_PER_SEC;
	if (ts->tv_nsec < 0) {
		ts->tv_nsec += NSEC_PER_SEC;
		ts->tv_sec--;
	}
}

int __vdso_clock_gettime(int clock, struct vdso_timespec *ts)
{
	int64_t real_off, boot_off, ns;

	if (ccvm_vdso_data.magic != VDSO_DATA_MAGIC)
		return (int)vdso_syscall2(NR_CLOCK_GETTIME, clock, (long)ts);
	switch (clock) {
	case CLOCK_REALTIME:
	case CLOCK_REALTIME_COARSE:
		ns = (int64_t)vdso_read(&real_off, &boot_off) + real_off;
		break;
	case CLOCK_MONOTONIC:
	case CLOCK_MONOTONIC_RAW:
	case CLOCK_MONOTONIC_COARSE:
		ns = (int64_t)vdso_read(&real_off, &boot_off);
		break;
	case CLOCK_BOOTTIME:
		ns = (int64_t)vdso_read(&real_off, &boot_off) + boot_off;
		break;
	default:
		return (int)vdso_syscall2(NR_CLOCK_GETTIME, clock, (long)ts);
	}
	vdso_ns_to_ts(ns, ts);
	return 0;
}

int __vdso_gettimeofday(struct vdso_timeval *tv, void *tz)
{
	int64_t real_off, boot_off;

	if (ccvm_vdso_data.magic != VDSO_DATA_MAGIC || tz)
		return (int)vdso_syscall2(NR_GETTIMEOFDAY, (long)tv, (long)tz);
	if (tv) {
		int64_t ns = (int64_t)vdso_read(&real_off, &boot_off) + real_off;

		tv->tv_sec = ns / NSEC_PER_SEC;
		tv->tv_usec = (ns % NSEC_PER_SEC) / 1000;
	}
	return 0;
}

long __vdso_time(long *t)
{
	int64_t real_off, boot_off;
	long s;

	if (ccvm_vdso_data.magic != VDSO_DATA_MAGIC)
		return vdso_syscall2(NR_TIME, (long)t, 0);
	s = ((int64_t)vdso_read(&real_off, &boot_off) + real_off) / NSEC_PER_SEC;
	if (t)
		*t = s;
	return s;
}

int __vdso_clock_getres(int clock, struct vdso_timespec *res)
{
	switch (clock) {
	case CLOCK_REALTIME:
	case CLOCK_MONOTONIC:
	case CLOCK_MONOTONIC_RAW:
	case CLOCK_BOOTTIME:
		if (res) {
			res->tv_sec = 0;
			res->tv_nsec = 1;
		}
		return 0;
	default:
		return (int)vdso_syscall2(NR_CLOCK_GETRES, clock, (long)res);
	}
}

/* One node; the CPU is the one the guest thread last ran on as the monitor sees it.
 * ccvm does not pin vCPUs, so 0 is as true as any other answer. */
long __vdso_getcpu(unsigned *cpu, unsigned *node, void *unused)
{
	(void)unused;
	if (cpu)
		*cpu = 0;
	if (node)
		*node = 0;
	return 0;
}

/* The kernel's vDSO also exports the plain names as weak aliases. */
int clock_gettime(int, struct vdso_timespec *) __attribute__((weak, alias("__vdso_clock_gettime")));
int gettimeofday(struct vdso_timeval *, void *) __attribute__((weak, alias("__vdso_gettimeofday")));
long time(long *) __attribute__((weak, alias("__vdso_time")));
int clock_getres(int, struct vdso_timespec *) __attribute__((weak, alias("__vdso_clock_getres")));
long getcpu(unsigned *, unsigned *, void *) __attribute__((weak, alias("__vdso_getcpu")));

