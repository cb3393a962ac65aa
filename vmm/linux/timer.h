/*
 * timer.h - timers that end in a signal (timer.c): made and stopped with the process,
 * restored, and told of their signals.
 */
#ifndef CCVM_LX_TIMER_H
#define CCVM_LX_TIMER_H

#include "lx.h"

/* Timers (timer.c): made with the process' signal state, stopped with it. */
int lx_timer_init(struct lx_proc *p);
void lx_timer_fini(struct lx_proc *p);
/* Could this ccvm have made timer @t in slot @id (a saved state's)? Starting the
 * timers a restore armed, once the guest clock runs again. */
bool lx_timer_valid(int id, const struct lx_timer *t);
/* The clock id of host timerfd @host, or -EINVAL when it is not one (fdstate.c too). */
int lx_timerfd_clock(int host);
void lx_timer_start(struct lx_proc *p);
/* Wake the timer thread (starting it): it has threads to watch (p->lock held). */
void lx_timer_poke(struct lx_proc *p);
/* The guest takes @info, a POSIX timer's signal: a timer parked meanwhile is re-armed
 * after now, the periods it missed added to @info's overrun (p->lock held). */
void lx_timer_taken(struct lx_proc *p, siginfo_t *info);
/* execve's end of the POSIX timers (timer.c). */
void lx_timer_exec(struct lx_proc *p);

#endif
