/*
 * signal.h - the signal state of a process and its threads (signal.c): queues, masks,
 * sending, taking and waiting; the kernel's numbers and flags for them.
 */
#ifndef CCVM_LX_SIGNAL_H
#define CCVM_LX_SIGNAL_H

#include "call.h"

/* Signal numbers, sigaction flags and sigaltstack's, as the guest passes them. */
#define LX_SIG_BIT(s)      (1ULL << ((s) - 1))
#define LX_SIGSET_SIZE     8 /* the kernel's sigset_t, as calls pass its size */
#define LX_SIG_UNBLOCKABLE (LX_SIG_BIT(SIGKILL) | LX_SIG_BIT(SIGSTOP))
#define LX_SA_SIGINFO      0x00000004ULL
#define LX_SA_RESTORER     0x04000000ULL
#define LX_SA_ONSTACK      0x08000000ULL
#define LX_SA_RESTART      0x10000000ULL
#define LX_SA_NODEFER      0x40000000ULL
#define LX_SA_RESETHAND    0x80000000ULL
#define LX_SS_ONSTACK      1
#define LX_SS_DISABLE      2
#define LX_SS_AUTODISARM   (1U << 31)
#define LX_MINSIGSTKSZ     2048

/* Signals (signal.c). Delivery is on when the VM gives the fpu hooks; a thread is
 * known to senders from lx_sig_thread_add (-EAGAIN past LX_MAX_THREADS) until
 * lx_sig_thread_remove. lx_sig_send queues @info for the process (@tid 0) or one
 * thread (-ESRCH: no such thread, -EAGAIN: its queue is full); delivery is
 * sigframe.c's. */
bool lx_sig_on(const struct lx_proc *p);
/* A condition whose timed waits count on CLOCK_MONOTONIC: 0 or -errno. */
int lx_cond_init_monotonic(pthread_cond_t *cond);
int lx_sig_init(struct lx_proc *p);
void lx_sig_fini(struct lx_proc *p);
int lx_sig_thread_add(struct lx_proc *p, int tid);
void lx_sig_bind(struct lx_thread *t);
void lx_sig_thread_remove(struct lx_proc *p, int tid);
int lx_sig_send(struct lx_proc *p, int tid, const siginfo_t *info);
/* A write that failed with @rc: EPIPE raises SIGPIPE in the writer (not for a send
 * with MSG_NOSIGNAL). */
void lx_sig_broken_pipe(struct lx_call *c, int64_t rc);
bool lx_sig_thread_known(struct lx_proc *p, int tid);
/* Timer @id (LX_MAX_TIMERS: ITIMER_REAL) expired after @missed periods went by
 * unnoticed: its signal queued, or its queued one's overrun grown (p->lock held). */
void lx_sig_queue_timer(struct lx_proc *p, int id, int64_t missed);
/* Whether POSIX timer @id's signal is queued, not yet taken (p->lock held). */
bool lx_sig_timer_pending(struct lx_proc *p, int id);
/* What signal.c and sigframe.c share. The mask of a thread changes under the process
 * lock (senders read it); lx_sig_force raises a signal the kernel itself would (a bad
 * frame: SIGSEGV), @reset when its handler is what failed. lx_sig_user_regs: the
 * registers thread @t resumes with now (after a system call, RIP and RFLAGS as SYSRET
 * takes them). lx_sig_frame: the frame of @info for handler @act, the thread at user
 * registers @u, and c->regs at the handler; 0 or -EFAULT. */
void lx_sig_set_mask(struct lx_thread *t, uint64_t mask);
/* Does @sig's default action end the process? The signals @t lets in now; those of
 * @set pending for it (p->lock held). A kill-style siginfo from the guest's own
 * process. An exception's @info forced on @t as force_sig_fault does: 0, or -errno
 * when no queue takes it. */
bool lx_sig_kills(int sig);
uint64_t lx_sig_allowed(const struct lx_thread *t);
uint64_t lx_sig_pending(struct lx_thread *t, uint64_t set);
siginfo_t lx_sig_user_info(struct lx_call *c, int sig, int code);
int lx_sig_queue_fault(struct lx_thread *t, const siginfo_t *info);
void lx_sig_force(struct lx_call *c, int sig, bool reset);

/* Linux's restart codes, which a blocking call returns when a signal the guest takes
 * interrupts it. The guest never sees them: lx_sig_deliver turns them into EINTR or
 * a call made again, as the handler's SA_RESTART and the call decide. */
#define LX_ERESTARTSYS           512 /* restarted under SA_RESTART, else EINTR */
#define LX_ERESTARTNOINTR        513 /* always restarted */
#define LX_ERESTARTNOHAND        514 /* EINTR when a handler ran */
#define LX_ERESTART_RESTARTBLOCK 516 /* EINTR when a handler ran (sleeps) */
/* A host call made for the guest came back with EINTR: -@restart when a signal the
 * thread takes is pending (the call ends with it), 0 when it was only the monitor's
 * own wake-up and the caller calls again. errno is kept. */
int lx_sig_eintr(struct lx_call *c, int restart);
bool lx_sig_restart_code(int64_t rc);
/* ppoll's and the like's @mask holds while the call waits: the thread's own comes
 * back as it returns. 0, or a restart code when a signal it lets in is pending. */
int lx_sig_wait_mask(struct lx_call *c, uint64_t mask);
/* A signal set argument of @size bytes at @uaddr, read once into *@set: 0, -EINVAL
 * for a size other than the kernel's, -EFAULT. */
int lx_sigset_in(struct lx_call *c, uint64_t uaddr, uint64_t size, uint64_t *set);
/* The next signal of @allowed thread @t may take (its own first, then the
 * process'): 0, or its number with *@info filled (p->lock held). */
int lx_sig_take(struct lx_thread *t, uint64_t allowed, siginfo_t *info);
/* Sleep until a signal of @set is pending for the calling thread, or host monotonic
 * time @until (NULL: no end). The vCPU counts as blocked meanwhile, so pauses and
 * snapshots go ahead. 0, or -EAGAIN at the end with none pending. */
int lx_sig_wait(struct lx_call *c, uint64_t set, const struct timespec *until);
/* Sleep, as blocked, until a signal the calling thread takes is pending (returns
 * -@restart) or *@events, bumped under no lock, differs from @seen (0). Whoever bumps
 * it broadcasts the process' sigcond under its lock afterwards. */
int lx_sig_wait_event(struct lx_call *c, const uint64_t *events, uint64_t seen, int restart);

/* The timer thread's watch over kicked threads: kick again those still blocked with
 * a signal to take (a kick can land just before the host call it was meant to end);
 * false once there are none (p->lock held). */
bool lx_sig_rekick(struct lx_proc *p);

#endif
