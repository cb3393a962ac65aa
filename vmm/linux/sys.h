/*
 * sys.h - the system-call handlers (sys_*.c) and what they see: the call (call.h),
 * the table of calls (systab.h), and the objects they decode their arguments for, each
 * with its own header. Only the handlers and the dispatcher (syscall.c) include it;
 * the objects include each other's headers, below them.
 */
#ifndef CCVM_LX_SYS_H
#define CCVM_LX_SYS_H

#include "call.h"
#include "clock.h"
#include "exec.h"
#include "fastio.h"
#include "fdtable.h"
#include "mm.h"
#include "path.h"
#include "proc.h"
#include "ptree.h"
#include "scm.h"
#include "shm.h"
#include "sigframe.h"
#include "signal.h"
#include "signalfd.h"
#include "systab.h"
#include "timer.h"

typedef int64_t (*lx_handler)(struct lx_call *c);

/* Sleep the calling vCPU until guest clock @clock reads @deadline_ns (sys_misc.c). */
int lx_sleep_until(struct lx_call *c, int clock, int64_t deadline_ns, int64_t *left);
/* A thread's exit (sys_futex.c): zero its clear-tid word and wake a waiter; release
 * the robust locks it still held (its set_robust_list list) as OWNER_DIED. */
void lx_futex_clear_tid(struct lx_proc *p, uint64_t gva);
void lx_futex_exit_robust(struct lx_proc *p, uint64_t head_gva, int tid);

#define LX_DECLARE(name, support, note) int64_t sys_##name(struct lx_call *c);
LX_SYSCALLS(LX_DECLARE)
#undef LX_DECLARE

#endif
