/*
 * sigframe.c - signals delivered: which one a thread takes as it returns to the
 * program, a handler's frame on the guest's stack, and rt_sigreturn and sigaltstack.
 *
 * The frame is laid out as the kernel's x86-64 rt_sigframe: the return address (the
 * handler's restorer), a ucontext with the interrupted registers, the FPU and vector
 * state (an XSAVE area through the VM's hooks, with the kernel's magic words), the
 * mask and the alternate stack, then the siginfo. It goes below the red zone of the
 * interrupted stack, or on the alternate stack (SA_ONSTACK, SS_AUTODISARM).
 *
 * The guest owns the frame while the handler runs and may rewrite it, so rt_sigreturn
 * reads it once into monitor memory and takes from it only what a program may set at
 * CPL3: the general registers, the flags Linux lets it change, its own mask (never
 * blocking SIGKILL or SIGSTOP) and an FPU area whose header and MXCSR are checked
 * before the CPU sees them. A frame that cannot be written or read ends in SIGSEGV,
 * as in Linux.
 *
 * Delivery runs as a system call returns, or an exception or a kick comes back: every
 * signal the thread does not block is taken from signal.c's queues in Linux's order;
 * one that is ignored is dropped, one whose default action ends the process ends it,
 * one with a handler gets a frame. An interrupted call's restart code becomes EINTR or
 * the call made again, as the handler's SA_RESTART and the call decide.
 */
#include "sigframe.h"
#include "call.h"
#include "signal.h"
#include "../../base/log.h"
#include "../../base/x86.h"

#include <stddef.h>
#include <string.h>

#define LX_SYSCALL_INSN_LEN 2 /* `syscall`: a restarted call runs it again */
/* The frame: below the interrupted stack pointer, past the ABI's red zone. */
#define LX_RED_ZONE      128
#define LX_FPSTATE_ALIGN 64        /* XSAVE needs it */
#define LX_FRAME_ALIGN   16        /* the handler starts as if called: rsp + 8 aligned */
/* ucontext.uc_flags: the frame holds XSAVE state, and SS (restored strictly) */
#define LX_UC_FP_XSTATE          1
#define LX_UC_SIGCONTEXT_SS      2
#define LX_UC_STRICT_RESTORE_SS  4
/* The XSAVE area in a frame: the kernel's software-reserved bytes in the legacy
 * area say how big it is, and a second magic word follows it. */
#define LX_FP_XSTATE_MAGIC1 0x46505853U
#define LX_FP_XSTATE_MAGIC2 0x46505845U
#define LX_FP_SW_OFFSET     464
#define LX_FP_FSW_OFFSET    2
#define LX_FP_MXCSR_OFFSET  24
#define LX_FP_LEGACY_SIZE   512
#define LX_XSAVE_HDR_SIZE   64
#define LX_XFEATURE_FPSSE   3ULL   /* x87 and SSE, always in a frame's state */
#define LX_FP_MAX           16384  /* the largest XSAVE area taken: AMX is 11008 */
#define LX_FCW_INIT         0x037f /* FNINIT's control word */
#define LX_MXCSR_INIT       0x1f80
#define LX_MXCSR_RESERVED   0xffff0000U
/* The flags rt_sigreturn takes from the frame (Linux's FIX_EFLAGS): the rest, IF, IOPL,
 * NT, VM and so on, stay as the monitor has them. */
#define LX_RFLAGS_CF (1ULL << 0)
#define LX_RFLAGS_PF (1ULL << 2)
#define LX_RFLAGS_AF (1ULL << 4)
#define LX_RFLAGS_ZF (1ULL << 6)
#define LX_RFLAGS_SF (1ULL << 7)
#define LX_RFLAGS_OF (1ULL << 11)
#define LX_RFLAGS_RF (1ULL << 16)
#define LX_RFLAGS_FIX                                                                      \
	(LX_RFLAGS_CF | LX_RFLAGS_PF | LX_RFLAGS_AF | LX_RFLAGS_ZF | LX_RFLAGS_SF |         \
	 RFLAGS_TF | RFLAGS_DF | LX_RFLAGS_OF | RFLAGS_AC | LX_RFLAGS_RF)
/* A handler starts with these clear, as a function call expects. */
#define LX_RFLAGS_HANDLER_CLEAR (RFLAGS_DF | LX_RFLAGS_RF | RFLAGS_TF)

/* The kernel's struct sigcontext (uc_mcontext), stack_t and ucontext on x86-64. */
struct lx_sigcontext {
	uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
	uint64_t rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, eflags;
	uint16_t cs, gs, fs, ss;
	uint64_t err, trapno, oldmask, cr2;
	uint64_t fpstate;        /* guest address of the XSAVE area, 0: none */
	uint64_t reserved1[8];
};

struct lx_stack {
	uint64_t sp;
	int32_t flags;
	int32_t pad;
	uint64_t size;
};

struct lx_ucontext {
	uint64_t flags;
	uint64_t link;
	struct lx_stack stack;
	struct lx_sigcontext mc;
	uint64_t sigmask;
};

struct lx_rt_sigframe {
	uint64_t pretcode;       /* where the handler returns: its restorer */
	struct lx_ucontext uc;
	siginfo_t info;
};

_Static_assert(sizeof(struct lx_sigcontext) == 256, "the kernel's sigcontext is 256 bytes");
_Static_assert(sizeof(siginfo_t) == 128, "the kernel's siginfo is 128 bytes");
_Static_assert(sizeof(struct lx_rt_sigframe) == 440, "the kernel's rt_sigframe is 440 bytes");

/* The kernel's software-reserved bytes at LX_FP_SW_OFFSET of a frame's XSAVE area. */
struct lx_fp_sw {
	uint32_t magic1, extended_size;
	uint64_t xfeatures;
	uint32_t xstate_size;
	uint32_t padding[7];
};


/* A thread's XSAVE area while a frame is built or read: too big for a vCPU stack. */
static __thread uint8_t lx_fpbuf[LX_FP_MAX + sizeof(uint32_t)] __attribute__((aligned(64)));

/* The registers the thread would resume with now: after a system call, RIP and RFLAGS
 * are where `syscall` left them (RCX, R11), as SYSRET will take them. */
void lx_sig_user_regs(const struct lx_thread *t, const struct cpu_regs *r, struct cpu_regs *u)
{
	*u = *r;
	if (t->resume_exact)
		return;
	u->rip = r->rcx;
	u->rflags = x86_user_rflags(r->r11);
}

static bool lx_on_altstack(const struct lx_thread *t, uint64_t sp)
{
	if (t->altstack_flags & LX_SS_AUTODISARM)
		return false;
	return sp > t->altstack_sp && sp - t->altstack_sp <= t->altstack_size;
}

/* The FPU state saved into lx_fpbuf, marked as the kernel marks a frame's: its size
 * with the magic words, or -errno. */
static int lx_sig_fpu_save(struct lx_thread *t)
{
	const struct lx_hooks *h = t->proc->hooks;
	struct lx_fp_sw sw = { .magic1 = LX_FP_XSTATE_MAGIC1 };
	uint64_t xfeatures = 0;
	uint64_t *hdr = (uint64_t *)(lx_fpbuf + LX_FP_LEGACY_SIZE);
	int len = h->fpu_save(t->vcpu, lx_fpbuf, LX_FP_MAX, &xfeatures);
	uint32_t magic2 = LX_FP_XSTATE_MAGIC2;

	if (len < 0)
		return len;
	if (len < LX_FP_LEGACY_SIZE + LX_XSAVE_HDR_SIZE || len > LX_FP_MAX)
		return -EINVAL;
	hdr[0] |= LX_XFEATURE_FPSSE; /* the legacy area is always valid in a frame */
	sw.extended_size = (uint32_t)len + sizeof(magic2);
	sw.xfeatures = xfeatures | LX_XFEATURE_FPSSE;
	sw.xstate_size = (uint32_t)len;
	memcpy(lx_fpbuf + LX_FP_SW_OFFSET, &sw, sizeof(sw));
	memcpy(lx_fpbuf + len, &magic2, sizeof(magic2));
	return len;
}

/* A handler starts with the FPU as FNINIT and a fresh MXCSR leave it (the XSAVE header
 * all zero: every component in its initial state). */
static int lx_sig_fpu_init(struct lx_thread *t, size_t len)
{
	uint16_t fcw = LX_FCW_INIT;
	uint32_t mxcsr = LX_MXCSR_INIT;

	memset(lx_fpbuf, 0, len);
	memcpy(lx_fpbuf, &fcw, sizeof(fcw));
	memcpy(lx_fpbuf + LX_FP_MXCSR_OFFSET, &mxcsr, sizeof(mxcsr));
	return t->proc->hooks->fpu_load(t->vcpu, lx_fpbuf, len);
}

static void lx_sig_save_regs(struct lx_sigcontext *mc, const struct cpu_regs *u)
{
	*mc = (struct lx_sigcontext){
		.r8 = u->r8, .r9 = u->r9, .r10 = u->r10, .r11 = u->r11, .r12 = u->r12,
		.r13 = u->r13, .r14 = u->r14, .r15 = u->r15, .rdi = u->rdi, .rsi = u->rsi,
		.rbp = u->rbp, .rbx = u->rbx, .rdx = u->rdx, .rax = u->rax, .rcx = u->rcx,
		.rsp = u->rsp, .rip = u->rip, .eflags = u->rflags,
	};
}

/* Where the frame goes (Linux's get_sigframe): 0 when it would overflow the
 * alternate stack it is on or entering. @fp gets the XSAVE area's address. */
static uint64_t lx_sig_frame_at(const struct lx_thread *t, const struct lx_sigaction *act,
				uint64_t sp0, uint64_t fp_len, uint64_t *fp)
{
	bool nested = lx_on_altstack(t, sp0), entering = false;
	uint64_t sp = sp0 - LX_RED_ZONE;

	if ((act->flags & LX_SA_ONSTACK) && t->altstack_size && !lx_on_altstack(t, sp)) {
		sp = t->altstack_sp + t->altstack_size;
		entering = true;
	}
	sp = (sp - fp_len) & ~(uint64_t)(LX_FPSTATE_ALIGN - 1);
	*fp = sp;
	sp = ((sp - sizeof(struct lx_rt_sigframe)) & ~(uint64_t)(LX_FRAME_ALIGN - 1)) - 8;
	if ((nested || entering) &&
	    !(sp > t->altstack_sp && sp - t->altstack_sp <= t->altstack_size))
		return 0;
	return sp;
}

/*
 * Build @sig's frame for handler @act on the stack of @t, interrupted with user
 * registers @u, and point @regs at the handler. 0, or -EFAULT when the frame cannot
 * be written (the caller raises SIGSEGV).
 */
int lx_sig_frame(struct lx_call *c, const struct lx_sigaction *act,
			const siginfo_t *info, const struct cpu_regs *u)
{
	struct lx_thread *t = c->t;
	struct lx_rt_sigframe f = { .pretcode = act->restorer, .info = *info };
	int sig = info->si_signo, len = lx_sig_fpu_save(t);
	uint64_t fp, at;

	if (len < 0)
		return -EFAULT;
	if (!(act->flags & LX_SA_RESTORER))
		return -EFAULT; /* x86-64 has no default return path into the kernel */
	at = lx_sig_frame_at(t, act, u->rsp, (uint64_t)len + sizeof(uint32_t), &fp);
	if (!at || gmem_copy_out(t->proc->mem, fp, lx_fpbuf, (uint64_t)len + sizeof(uint32_t)))
		return -EFAULT;
	f.uc.flags = LX_UC_FP_XSTATE | LX_UC_SIGCONTEXT_SS | LX_UC_STRICT_RESTORE_SS;
	f.uc.stack = (struct lx_stack){ .sp = t->altstack_sp, .size = t->altstack_size,
					.flags = t->altstack_size ? (int32_t)t->altstack_flags :
								    LX_SS_DISABLE };
	lx_sig_save_regs(&f.uc.mc, u);
	if (t->trap) { /* what the handler of a fault learns of it */
		f.uc.mc.trapno = (uint64_t)t->trap->vector;
		f.uc.mc.err = t->trap->error_code;
		f.uc.mc.cr2 = t->trap->cr2;
	}
	/* The user selectors, whatever the monitor's view (CPL0 on a `syscall` or in an
	 * exception stub): the guest ran with these, and they are Linux's. */
	f.uc.mc.cs = GDT_USER_CS;
	f.uc.mc.ss = GDT_USER_DS;
	/* After rt_sigsuspend the handler returns to the mask from before the call. */
	f.uc.sigmask = t->restore_mask ? t->saved_mask : t->sigmask;
	f.uc.mc.oldmask = f.uc.sigmask;
	f.uc.mc.fpstate = fp;
	if (gmem_copy_out(t->proc->mem, at, &f, sizeof(f)))
		return -EFAULT;
	if (lx_sig_fpu_init(t, (size_t)len))
		return -EFAULT;

	*c->regs = *u;
	c->regs->rdi = (uint64_t)sig;
	c->regs->rsi = at + offsetof(struct lx_rt_sigframe, info);
	c->regs->rdx = at + offsetof(struct lx_rt_sigframe, uc);
	c->regs->rax = 0; /* for a handler declared without a prototype */
	c->regs->rsp = at;
	c->regs->rip = act->handler;
	c->regs->rflags = u->rflags & ~LX_RFLAGS_HANDLER_CLEAR;
	t->resume_exact = true;
	if (t->altstack_flags & LX_SS_AUTODISARM)
		t->altstack_sp = t->altstack_size = 0;
	lx_sig_set_mask(t, (t->sigmask | act->mask |
			    (act->flags & LX_SA_NODEFER ? 0 : LX_SIG_BIT(sig))));
	t->restore_mask = false;
	return 0;
}

/* The XSAVE area at guest @gva, as a frame holds it, checked into lx_fpbuf for the
 * CPU: its size from the frame's own marks (the legacy 512 bytes when they are
 * missing, as Linux takes them), components the VM does not have cleared, MXCSR's
 * reserved bits and the header's reserved words zero. Its length, or -EFAULT. */
static int lx_sig_fpu_read(struct lx_thread *t, uint64_t gva)
{
	uint64_t xfeatures = 0;
	int len = t->proc->hooks->fpu_save(t->vcpu, lx_fpbuf, LX_FP_MAX, &xfeatures);
	uint64_t *hdr = (uint64_t *)(lx_fpbuf + LX_FP_LEGACY_SIZE);
	struct lx_fp_sw sw;
	uint32_t mxcsr, magic2;
	bool full;

	if (len < LX_FP_LEGACY_SIZE + LX_XSAVE_HDR_SIZE || len > LX_FP_MAX)
		return -EFAULT;
	if (gmem_copy_in(t->proc->mem, &sw, gva + LX_FP_SW_OFFSET, sizeof(sw)))
		return -EFAULT;
	full = sw.magic1 == LX_FP_XSTATE_MAGIC1 && sw.xstate_size == (uint32_t)len &&
	       sw.extended_size == (uint32_t)len + sizeof(magic2) &&
	       !gmem_copy_in(t->proc->mem, &magic2, gva + (uint64_t)len, sizeof(magic2)) &&
	       magic2 == LX_FP_XSTATE_MAGIC2;
	if (full) {
		if (gmem_copy_in(t->proc->mem, lx_fpbuf, gva, (uint64_t)len))
			return -EFAULT;
		hdr[0] &= xfeatures & sw.xfeatures;
	} else {
		if (gmem_copy_in(t->proc->mem, lx_fpbuf, gva, LX_FP_LEGACY_SIZE))
			return -EFAULT;
		memset(lx_fpbuf + LX_FP_LEGACY_SIZE, 0, (size_t)len - LX_FP_LEGACY_SIZE);
		hdr[0] = LX_XFEATURE_FPSSE;
	}
	memset(&hdr[1], 0, LX_XSAVE_HDR_SIZE - sizeof(hdr[0])); /* standard form, reserved 0 */
	memcpy(&mxcsr, lx_fpbuf + LX_FP_MXCSR_OFFSET, sizeof(mxcsr));
	mxcsr &= ~LX_MXCSR_RESERVED;
	memcpy(lx_fpbuf + LX_FP_MXCSR_OFFSET, &mxcsr, sizeof(mxcsr));
	return len;
}

static void lx_sig_load_regs(struct cpu_regs *r, const struct lx_sigcontext *mc)
{
	r->r8 = mc->r8, r->r9 = mc->r9, r->r10 = mc->r10, r->r11 = mc->r11;
	r->r12 = mc->r12, r->r13 = mc->r13, r->r14 = mc->r14, r->r15 = mc->r15;
	r->rdi = mc->rdi, r->rsi = mc->rsi, r->rbp = mc->rbp, r->rbx = mc->rbx;
	r->rdx = mc->rdx, r->rax = mc->rax, r->rcx = mc->rcx, r->rsp = mc->rsp;
	r->rip = mc->rip;
	r->rflags = (r->rflags & ~LX_RFLAGS_FIX) | (mc->eflags & LX_RFLAGS_FIX);
}

/* sigaltstack's change (Linux's do_sigaltstack), the thread's stack pointer at @sp. */
static int lx_sig_altstack_set(struct lx_thread *t, const struct lx_stack *ss, uint64_t sp)
{
	uint32_t flags = (uint32_t)ss->flags;

	if (t->altstack_size && lx_on_altstack(t, sp))
		return -EPERM;
	if ((flags & ~(uint32_t)(LX_SS_DISABLE | LX_SS_AUTODISARM | LX_SS_ONSTACK)))
		return -EINVAL;
	if (flags & LX_SS_DISABLE) {
		t->altstack_sp = t->altstack_size = 0;
		t->altstack_flags = 0;
		return 0;
	}
	if (ss->size < LX_MINSIGSTKSZ)
		return -ENOMEM;
	t->altstack_sp = ss->sp;
	t->altstack_size = ss->size;
	t->altstack_flags = flags & LX_SS_AUTODISARM;
	return 0;
}

int64_t lx_sig_return(struct lx_call *c)
{
	struct lx_thread *t = c->t;
	struct lx_rt_sigframe f;
	struct cpu_regs u;
	int len;

	if (!lx_sig_on(c->p))
		return lx_unsupported(c);
	/* The handler's `ret` popped pretcode: the frame starts 8 bytes below. */
	if (gmem_copy_in(c->p->mem, &f, c->regs->rsp - 8, sizeof(f)))
		goto bad;
	/* No XSAVE area named: the FPU starts afresh, as Linux does. */
	len = f.uc.mc.fpstate ? lx_sig_fpu_read(t, f.uc.mc.fpstate) : lx_sig_fpu_save(t);
	if (len < 0)
		goto bad;
	if (f.uc.mc.fpstate ? c->p->hooks->fpu_load(t->vcpu, lx_fpbuf, (size_t)len) :
			      lx_sig_fpu_init(t, (size_t)len))
		goto bad;
	lx_sig_set_mask(t, f.uc.sigmask);
	lx_sig_user_regs(t, c->regs, &u);
	lx_sig_load_regs(&u, &f.uc.mc);
	(void)lx_sig_altstack_set(t, &f.uc.stack, u.rsp); /* Linux ignores its errors */
	*c->regs = u;
	t->resume_exact = true;
	return (int64_t)u.rax;
bad:
	log_warn("guest thread %d returned from a signal handler with a damaged frame at "
		 "%#llx: SIGSEGV", t->tid, (unsigned long long)(c->regs->rsp - 8));
	lx_sig_force(c, SIGSEGV, false);
	return 0;
}

int64_t lx_sig_altstack(struct lx_call *c)
{
	struct lx_thread *t = c->t;
	struct lx_stack ss, old = { .sp = t->altstack_sp, .size = t->altstack_size };
	uint64_t sp = c->regs->rsp;

	old.flags = !t->altstack_size       ? LX_SS_DISABLE :
		    lx_on_altstack(t, sp)   ? LX_SS_ONSTACK :
					      (int32_t)t->altstack_flags;
	if (c->a[0] && lx_copy_in(c, &ss, c->a[0], sizeof(ss)))
		return -EFAULT;
	if (c->a[1] && lx_copy_out(c, c->a[1], &old, sizeof(old)))
		return -EFAULT;
	return c->a[0] ? lx_sig_altstack_set(t, &ss, sp) : 0;
}

int lx_sig_fpu_words(struct lx_thread *t, uint16_t *fcw, uint16_t *fsw, uint32_t *mxcsr)
{
	int len = t->proc->hooks->fpu_save(t->vcpu, lx_fpbuf, LX_FP_MAX, &(uint64_t){ 0 });

	if (len < LX_FP_LEGACY_SIZE)
		return len < 0 ? len : -EINVAL;
	memcpy(fcw, lx_fpbuf, sizeof(*fcw));
	memcpy(fsw, lx_fpbuf + LX_FP_FSW_OFFSET, sizeof(*fsw));
	memcpy(mxcsr, lx_fpbuf + LX_FP_MXCSR_OFFSET, sizeof(*mxcsr));
	return 0;
}

/* ---- delivery ---- */

/* What to do with @sig taken for @t: 1 to run handler *@act, 0 when done with it
 * (ignored), -1 when it ends the process. */
static int lx_sig_disposition(struct lx_thread *t, int sig, struct lx_sigaction *act)
{
	struct lx_proc *p = t->proc;

	*act = p->sigact[sig];
	if (sig == SIGKILL)
		return -1;
	if (act->handler == (uint64_t)(uintptr_t)SIG_IGN)
		return 0;
	if (act->handler == (uint64_t)(uintptr_t)SIG_DFL)
		return lx_sig_kills(sig) ? -1 : 0;
	if (act->flags & LX_SA_RESETHAND)
		p->sigact[sig] = (struct lx_sigaction){ .handler = (uint64_t)(uintptr_t)SIG_DFL };
	return 1;
}

/* The interrupted call's restart code @rc meets handler @act (NULL: none ran): the
 * call's result in the user registers @u becomes EINTR, or the call is made again
 * (its number back in RAX, RIP back on the `syscall` instruction), as in Linux. */
static void lx_sig_restart(const struct lx_call *c, int64_t rc, const struct lx_sigaction *act,
			   struct cpu_regs *u)
{
	bool again = rc == -LX_ERESTARTNOINTR;

	if (!act)
		again = rc != -LX_ERESTART_RESTARTBLOCK; /* a sleep ends early: EINTR */
	else if (rc == -LX_ERESTARTSYS)
		again = act->flags & LX_SA_RESTART;
	if (!again) {
		u->rax = (uint64_t)-EINTR;
		return;
	}
	u->rax = c->nr;
	u->rip -= LX_SYSCALL_INSN_LEN;
}

void lx_sig_deliver(struct lx_call *c)
{
	struct lx_thread *t = c->t;
	struct lx_proc *p = c->p;
	int64_t rc = (int64_t)c->regs->rax;
	bool restart = !t->resume_exact && lx_sig_restart_code(rc);

	/* A call that waited with a mask of its own and was not interrupted gives the
	 * thread its mask back before any signal is taken (Linux's
	 * restore_saved_sigmask_unless): only an interrupted one leaves it to the frame. */
	if (t->restore_mask && !restart && rc != -EINTR) {
		lx_sig_set_mask(t, t->saved_mask);
		t->restore_mask = false;
	}

	/* Nothing queued where this thread looks, read without the lock: the common case
	 * on every system call's return. A signal queued just after kicks the thread,
	 * which takes it then (at its run's return, or here after its next call). */
	if (!restart && !t->restore_mask && !__atomic_load_n(&p->sigpend.set, __ATOMIC_RELAXED) &&
	    !(t->sigslot && __atomic_load_n(&t->sigslot->pend.set, __ATOMIC_RELAXED)))
		return;

	/* Each round takes one signal; a handler's mask may let the next one in too,
	 * nesting its frame, as Linux does before it returns to user mode. Every round
	 * empties a queue slot or resets a handler, so this ends. */
	for (int round = 0; round < 2 * (LX_NSIG + 2 * LX_SIGQUEUE_MAX); round++) {
		struct lx_sigaction act;
		struct cpu_regs u;
		siginfo_t info;
		int sig, what;

		pthread_mutex_lock(&p->lock);
		sig = lx_sig_take(t, lx_sig_allowed(t), &info);
		what = sig ? lx_sig_disposition(t, sig, &act) : 0;
		pthread_mutex_unlock(&p->lock);
		if (!sig)
			break;
		if (what < 0) {
			p->exit_status = 128 + sig;
			p->term_sig = sig;
			c->action = LX_EXIT_GROUP;
			return;
		}
		if (what == 0)
			continue;
		lx_sig_user_regs(t, c->regs, &u);
		if (restart)
			lx_sig_restart(c, rc, &act, &u);
		restart = false;
		if (lx_sig_frame(c, &act, &info, &u)) {
			log_warn("could not write the frame of signal %d on the guest stack at "
				 "%#llx: SIGSEGV", sig, (unsigned long long)u.rsp);
			lx_sig_force(c, SIGSEGV, sig == SIGSEGV);
			if (c->action != LX_RESUME)
				return;
		}
	}
	/* Interrupted, and no handler ran (another thread ignored the signal meanwhile). */
	if (restart) {
		struct cpu_regs u;

		lx_sig_user_regs(t, c->regs, &u);
		lx_sig_restart(c, rc, NULL, &u);
		*c->regs = u;
		t->resume_exact = true;
	}
	/* rt_sigsuspend woken by a signal no handler took: its mask goes back now. */
	if (t->restore_mask) {
		lx_sig_set_mask(t, t->saved_mask);
		t->restore_mask = false;
	}
}

enum lx_action lx_sig_interrupt(struct lx_thread *t, struct cpu_regs *regs,
				struct cpu_segs *segs)
{
	struct lx_call c = { .t = t, .p = t->proc, .nr = UINT64_MAX, .regs = regs,
			     .segs = segs, .action = LX_RESUME };

	if (!lx_sig_on(t->proc))
		return LX_RESUME;
	if (!t->sig_bound)
		lx_sig_bind(t);
	t->resume_exact = true; /* the registers are the CPU's, not a system call's */
	lx_sig_deliver(&c);
	return c.action;
}

/* An exception's signal (sigfault.c): forced on the thread, then delivered. */
bool lx_sig_fault(struct lx_thread *t, struct cpu_regs *regs, struct cpu_segs *segs,
		  const siginfo_t *info, const struct lx_fault *f)
{
	struct lx_call c = { .t = t, .p = t->proc, .nr = UINT64_MAX, .regs = regs,
			     .segs = segs, .action = LX_RESUME };

	if (!t->sig_bound)
		lx_sig_bind(t);
	if (lx_sig_queue_fault(t, info))
		return false;
	/* The registers are the whole user context the CPU left, not a system call's. */
	t->resume_exact = true;
	t->trap = f;
	lx_sig_deliver(&c);
	t->trap = NULL;
	return c.action == LX_RESUME;
}
