/*
 * clock.c - guest time, shared by the vDSO and the clock system calls.
 *
 * Guest monotonic time is a linear function of the TSC, fixed when the VM starts:
 * the vDSO evaluates it inside the guest from the data page, and the monitor
 * evaluates the same function with the host TSC plus the VM's TSC offset, so the two
 * paths can never disagree or make time go backwards. Realtime is monotonic time
 * plus an offset that lx_clock_refresh() re-reads from the host now and then.
 */
#include "clock.h"
#include "../../base/x86.h"
#include "../../guest/vdso/vdso_abi.h"

#include <string.h>
#include <time.h>
#include <x86intrin.h>

#define NSEC_PER_SEC 1000000000LL
#define CLOCK_SHIFT  32

static int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * NSEC_PER_SEC + ts->tv_nsec;
}

static uint64_t clock_guest_tsc(const struct lx_clock *k)
{
	return __rdtsc() + (uint64_t)k->tsc_offset;
}

static uint64_t clock_mono_ns(const struct lx_clock *k)
{
	uint64_t tsc = clock_guest_tsc(k);
	uint64_t delta = tsc > k->tsc_base ? tsc - k->tsc_base : 0;

	return k->mono_base_ns + (uint64_t)(((unsigned __int128)delta * k->mult) >> k->shift);
}

/* Write the offsets under the sequence counter the vDSO checks. */
static void clock_publish_offsets(struct lx_proc *p, int64_t real_off, int64_t boot_off)
{
	struct vdso_data *d = p->clock.data;

	__atomic_store_n(&d->seq, d->seq + 1, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	d->realtime_off_ns = real_off;
	d->boottime_off_ns = boot_off;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&d->seq, d->seq + 1, __ATOMIC_RELEASE);
}

void lx_clock_refresh(struct lx_proc *p)
{
	struct timespec real, boot;
	int64_t mono = (int64_t)clock_mono_ns(&p->clock);

	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_BOOTTIME, &boot);
	if (p->clock.data)
		clock_publish_offsets(p, ts_ns(&real) - mono, ts_ns(&boot) - mono);
}

void lx_clock_map(struct lx_proc *p)
{
	p->clock.data = gmem_user_ptr_held(p->mem, p->mm.vdso_base - PAGE_SIZE, PAGE_SIZE);
	p->clock.counters = gmem_user_ptr_held(p->mem, p->mm.vdso_base - 2 * PAGE_SIZE, PAGE_SIZE);
}

uint64_t lx_clock_reads(const struct lx_proc *p)
{
	/* The guest writes the page at will: a number to read, never anything to follow. */
	return p->clock.counters ? __atomic_load_n(&p->clock.counters->clock_reads, __ATOMIC_RELAXED) : 0;
}

uint64_t lx_clock_mono_ns(struct lx_proc *p)
{
	return clock_mono_ns(&p->clock);
}

void lx_clock_init(struct lx_proc *p, int64_t tsc_offset, uint32_t tsc_khz)
{
	struct timespec mono;

	clock_gettime(CLOCK_MONOTONIC, &mono);
	lx_clock_resume(p, tsc_offset, tsc_khz, (uint64_t)ts_ns(&mono));
}

/* (sys.h) The clock as it runs, into the vDSO's data page (a new one after execve). */
void lx_clock_publish(struct lx_proc *p)
{
	struct lx_clock *k = &p->clock;
	struct vdso_data *d = k->data;

	if (!d)
		return;
	d->seq = 0;
	d->shift = k->shift;
	d->mult = k->mult;
	d->tsc_base = k->tsc_base;
	d->mono_base_ns = k->mono_base_ns;
	d->coarse_res_ns = 1;
	lx_clock_refresh(p);
	__atomic_store_n(&d->magic, VDSO_DATA_MAGIC, __ATOMIC_RELEASE);
}

/* Start (or restart, after a restore) guest monotonic time at @mono_ns now. */
void lx_clock_resume(struct lx_proc *p, int64_t tsc_offset, uint32_t tsc_khz, uint64_t mono_ns)
{
	struct lx_clock *k = &p->clock;

	k->tsc_offset = tsc_offset;
	k->shift = CLOCK_SHIFT;
	/* ns per tick = 1e6 / kHz, as a 32.32 fixed-point multiplier. */
	k->mult = (uint64_t)(((unsigned __int128)1000000 << CLOCK_SHIFT) / (tsc_khz ? tsc_khz : 1));
	k->tsc_base = clock_guest_tsc(k);
	k->mono_base_ns = mono_ns;
	lx_clock_publish(p);
}

/* The guest's view of @clock in nanoseconds; -EINVAL for clocks it does not have. */
int lx_clock_now(struct lx_proc *p, int clock, int64_t *ns)
{
	struct timespec ts;
	int64_t mono = (int64_t)clock_mono_ns(&p->clock);
	const struct vdso_data *d = p->clock.data;

	switch (clock) {
	case CLOCK_REALTIME:
	case CLOCK_REALTIME_COARSE:
	case CLOCK_TAI:
		*ns = mono + (d ? d->realtime_off_ns : 0);
		if (clock == CLOCK_TAI) {
			clock_gettime(CLOCK_TAI, &ts);
			*ns = ts_ns(&ts);
		}
		return 0;
	case CLOCK_MONOTONIC:
	case CLOCK_MONOTONIC_RAW:
	case CLOCK_MONOTONIC_COARSE:
		*ns = mono;
		return 0;
	case CLOCK_BOOTTIME:
		*ns = mono + (d ? d->boottime_off_ns : 0);
		return 0;
	case CLOCK_PROCESS_CPUTIME_ID:
	case CLOCK_THREAD_CPUTIME_ID:
		/* The host thread's CPU time: guest time plus the monitor's work for it. */
		if (clock_gettime(clock, &ts) < 0)
			return -errno;
		*ns = ts_ns(&ts);
		return 0;
	default:
		return -EINVAL;
	}
}
