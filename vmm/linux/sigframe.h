/*
 * sigframe.h - signals delivered (sigframe.c): frames on the guest's stack, rt_sigreturn,
 * sigaltstack, and an exception's signal.
 */
#ifndef CCVM_LX_SIGFRAME_H
#define CCVM_LX_SIGFRAME_H

#include "call.h"

/* Delivery as a call returns: the signals the thread takes now, each to its handler
 * or its default action (sigframe.c). */
void lx_sig_deliver(struct lx_call *c);
/* rt_sigreturn's and sigaltstack's work (sigframe.c); signalfd's (signalfd.c): @fd -1
 * for a new one, else the one whose mask changes. */
int64_t lx_sig_return(struct lx_call *c);
int64_t lx_sig_altstack(struct lx_call *c);
void lx_sig_user_regs(const struct lx_thread *t, const struct cpu_regs *r, struct cpu_regs *u);
int lx_sig_frame(struct lx_call *c, const struct lx_sigaction *act, const siginfo_t *info,
		 const struct cpu_regs *u);

/* The x87 control and status words and MXCSR of thread @t now: 0 or -errno. Forcing
 * exception @f's signal @info on @t (sigfault.c): true when a handler takes it. */
int lx_sig_fpu_words(struct lx_thread *t, uint16_t *fcw, uint16_t *fsw, uint32_t *mxcsr);
bool lx_sig_fault(struct lx_thread *t, struct cpu_regs *regs, struct cpu_segs *segs,
		  const siginfo_t *info, const struct lx_fault *f);

#endif
