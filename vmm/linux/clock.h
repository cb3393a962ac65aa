/*
 * clock.h - the guest clocks as the monitor keeps them (clock.c): read, and published
 * into a process's vDSO page.
 */
#ifndef CCVM_LX_CLOCK_H
#define CCVM_LX_CLOCK_H

#include "lx.h"

/* Clocks (clock.c): the monitor's view of the guest clocks. */
int lx_clock_now(struct lx_proc *p, int clock, int64_t *ns);
/* The clock into a new vDSO data page, as after execve (clock.c). */
void lx_clock_publish(struct lx_proc *p);

#endif
