/*
 * sigfault.c - the signal a CPU exception in the guest program raises, as Linux
 * raises it (arch/x86/kernel/traps.c and mm/fault.c): which signal, its si_code and
 * si_addr, and the trap number, error code and address its handler finds in the
 * frame.
 *
 * The VM's exception stubs report the vector, error code and faulting address; this
 * file turns them into a siginfo and hands it to signal.c, which forces it on the
 * thread as Linux's force_sig_fault does (a blocked or ignored one falls back to the
 * default action). When no handler takes it the VM keeps its crash report, and the
 * status it exits with is 128 + lx_fault_signal(vector), the signal that killed the
 * program.
 */
#include "sigframe.h"
#include "signal.h"
#include "../../base/x86.h"

#include <string.h>

/* x87 status and MXCSR exception flags, and MXCSR's masks (7 bits up) */
#define LX_FPX_INVALID   0x001
#define LX_FPX_DENORMAL  0x002
#define LX_FPX_ZERODIV   0x004
#define LX_FPX_OVERFLOW  0x008
#define LX_FPX_UNDERFLOW 0x010
#define LX_FPX_PRECISION 0x020
#define LX_FPX_ALL       0x03f
#define LX_MXCSR_MASK_SHIFT 7

int lx_fault_signal(int vector)
{
	switch (vector) {
	case X86_DE:
	case X86_MF:
	case X86_XM:
		return SIGFPE;
	case X86_DB:
	case X86_BP:
		return SIGTRAP;
	case X86_UD:
		return SIGILL;
	case X86_NP:
	case X86_SS:
	case X86_AC:
	case X86_MC:
		return SIGBUS;
	default:
		return SIGSEGV;
	}
}

/* A floating-point exception's si_code from the flags raised and not masked (Linux's
 * fpu__exception_code): the first by Linux's order, 0 when none is. */
static int lx_fpe_code(unsigned raised)
{
	if (raised & LX_FPX_INVALID)
		return FPE_FLTINV;
	if (raised & LX_FPX_ZERODIV)
		return FPE_FLTDIV;
	if (raised & LX_FPX_OVERFLOW)
		return FPE_FLTOVF;
	if (raised & (LX_FPX_DENORMAL | LX_FPX_UNDERFLOW))
		return FPE_FLTUND;
	if (raised & LX_FPX_PRECISION)
		return FPE_FLTRES;
	return 0;
}

int lx_fault_info(const struct lx_fault *f, uint64_t rip, uint64_t rflags, siginfo_t *info)
{
	int code = SI_KERNEL;
	uint64_t addr = 0;

	switch (f->vector) {
	case X86_PF:
		code = f->nomem ? BUS_ADRERR : f->mapped ? SEGV_ACCERR : SEGV_MAPERR;
		addr = f->cr2;
		break;
	case X86_DE:
		code = FPE_INTDIV;
		addr = rip;
		break;
	case X86_UD:
		code = ILL_ILLOPN;
		addr = rip;
		break;
	case X86_DB:
		code = rflags & RFLAGS_TF ? TRAP_TRACE : TRAP_BRKPT;
		addr = rip;
		break;
	case X86_AC:
		code = BUS_ADRALN;
		break;
	case X86_MF:
		code = lx_fpe_code(f->fsw & ~f->fcw & LX_FPX_ALL);
		addr = rip;
		break;
	case X86_XM:
		code = lx_fpe_code(f->mxcsr & ~(f->mxcsr >> LX_MXCSR_MASK_SHIFT) & LX_FPX_ALL);
		addr = rip;
		break;
	default:
		break;
	}
	if (!code)
		return -EAGAIN; /* no unmasked exception raised: nothing to report */
	memset(info, 0, sizeof(*info));
	/* Memory that cannot be backed is a SIGBUS, as Linux gives for a page it cannot
	 * allocate under a hard limit (hugetlbfs, a truncated file). */
	info->si_signo = f->nomem ? SIGBUS : lx_fault_signal(f->vector);
	info->si_code = code;
	info->si_addr = (void *)(uintptr_t)addr;
	return 0;
}

bool lx_fault(struct lx_thread *t, struct cpu_regs *regs, struct cpu_segs *segs,
	      const struct lx_fault *f)
{
	struct lx_fault g = *f;
	siginfo_t info;

	if (!lx_sig_on(t->proc))
		return false;
	if ((g.vector == X86_MF || g.vector == X86_XM) &&
	    lx_sig_fpu_words(t, &g.fcw, &g.fsw, &g.mxcsr))
		return false;
	if (g.vector == X86_PF) {
		pthread_mutex_lock(&t->proc->lock);
		g.mapped = vma_find(&t->proc->mm.map, g.cr2) != NULL;
		pthread_mutex_unlock(&t->proc->lock);
	}
	if (lx_fault_info(&g, regs->rip, regs->rflags, &info))
		return true;
	return lx_sig_fault(t, regs, segs, &info, &g);
}
