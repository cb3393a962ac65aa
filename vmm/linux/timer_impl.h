/*
 * timer_impl.h - what the timers (timer.c) and their calls (sys_timer.c) share: the
 * kernel's names and limits, and the operations on one timer, each with p->lock held
 * unless it says.
 */
#ifndef CCVM_LX_TIMER_IMPL_H
#define CCVM_LX_TIMER_IMPL_H

#include "clock.h"
#include "signal.h"
#include "timer.h"

#include <sys/time.h>

#define LX_NSEC_PER_SEC  1000000000LL
#define LX_NSEC_PER_USEC 1000LL
#define LX_ITIMER_REAL   LX_MAX_TIMERS /* its slot in lx_timers.t */
#define LX_SIGEV_SIGNAL    0
#define LX_SIGEV_NONE      1
#define LX_SIGEV_THREAD_ID 4
#define LX_TIMER_ABSTIME   1
#define LX_TIMER_FAR       (INT64_MAX / 4) /* beyond any expiry: no overflow adding now */
/* How soon a kicked thread that is still blocked is kicked again: the latency of a
 * signal whose kick landed just before the host call it was to interrupt. */
#define LX_REKICK_NS       (10 * 1000000LL)
/* The timer thread's tick: a periodic timer with a shorter interval fires at most once
 * per tick, the periods in between counted as overruns, as Linux's hrtimer_forward
 * does below its resolution, instead of waking the thread again at once (a 1 ns
 * interval would keep it spinning). */
#define LX_TIMER_TICK_NS   (1000000LL)

/* The kernel's struct sigevent as timer_create reads it (64 bytes). */
struct lx_sigevent {
	uint64_t value;
	int32_t signo;
	int32_t notify;
	int32_t tid;
	int32_t pad[11];
};

_Static_assert(sizeof(struct lx_sigevent) == 64, "the kernel's sigevent is 64 bytes");
#define LX_TFD_CREATE_FLAGS (TFD_CLOEXEC | TFD_NONBLOCK)
#define LX_TFD_SET_FLAGS    (TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET)

/* Guest clock @clock now, in ns; arm @tm to expire at guest @deadline, then every
 * @interval ns (the thread starts with the first timer armed: 0, or -EAGAIN); the time
 * left and period of @tm; is @clock one a timer may count on. */
int64_t lx_timer_now(struct lx_proc *p, int clock);
int lx_timer_arm(struct lx_proc *p, struct lx_timer *tm, int64_t deadline, int64_t interval);
void lx_timer_left(struct lx_proc *p, const struct lx_timer *tm, int64_t *left,
		   int64_t *interval);
bool lx_timer_clock_ok(uint64_t clock);

#endif
