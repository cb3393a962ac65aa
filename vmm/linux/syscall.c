/*
 * syscall.c - system-call dispatch of the Linux personality.
 *
 * A guest `syscall` lands in the monitor as a VM exit; vcpu_loop.c hands the registers
 * here. The number indexes a table of handlers; every call is counted (for `ccvm ctl
 * stats`), and a call without a handler returns -ENOSYS and is logged once by name,
 * which is how a missing piece of the personality shows itself.
 */
#include "sys.h"
#include "../../base/log.h"
#include "syscall_names.h"
#include "sysfilter.h"

#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

#define LX_TABLE_ENTRY(name, support, note) [__NR_##name] = sys_##name,

/* Dispatch by number, from the one table of calls and their support (systab.h). */
static const lx_handler lx_table[LX_NR_SYSCALLS] = { LX_SYSCALLS(LX_TABLE_ENTRY) };

/* A seccomp profile's verdict other than allow: the call's result, or 1 when the
 * handler runs after all (LOG). */
static int64_t lx_filtered(struct lx_call *c, struct lx_filter_verdict v, bool *run)
{
	*run = false;
	switch (v.act) {
	case LX_FA_LOG:
		log_info("seccomp profile: the guest called %s", lx_syscall_name((unsigned)c->nr));
		*run = true;
		return 0;
	case LX_FA_ERRNO:
		return -v.err;
	case LX_FA_TRAP:
	case LX_FA_KILL:
		/* as the kernel: SIGSYS forced on the thread, and under KILL it cannot be
		 * caught; the call itself is not made */
		lx_sig_force(c, SIGSYS, v.act == LX_FA_KILL);
		return -ENOSYS;
	default:
		return -ENOSYS; /* TRACE with no tracer */
	}
}

enum lx_action lx_syscall(struct lx_thread *t, struct cpu_regs *regs, struct cpu_segs *segs,
			  bool *segs_dirty)
{
	struct lx_call c = {
		.t = t,
		.p = t->proc,
		.nr = regs->rax,
		.a = { regs->rdi, regs->rsi, regs->rdx, regs->r10, regs->r8, regs->r9 },
		.regs = regs,
		.segs = segs,
		.action = LX_RESUME,
	};
	lx_handler h = c.nr < LX_NR_SYSCALLS ? lx_table[c.nr] : NULL;

	t->resume_exact = false;
	if (!t->sig_bound && lx_sig_on(t->proc))
		lx_sig_bind(t);

	/* Writes the guest made without exiting go out before anything this call does. */
	lx_fastio_flush(t->proc);
	__atomic_fetch_add(&t->proc->sys_count[c.nr < LX_NR_SYSCALLS ? c.nr : LX_NR_SYSCALLS - 1],
			   1, __ATOMIC_RELAXED);
	bool run = true;

	if (c.p->filter) {
		struct lx_filter_verdict v = lx_filter_check(c.p->filter, c.nr, c.a);

		if (v.act != LX_FA_ALLOW)
			regs->rax = (uint64_t)lx_filtered(&c, v, &run);
	}
	if (run)
		regs->rax = (uint64_t)(h ? h(&c) : lx_unsupported(&c));
	lx_call_release(&c);
	if (c.action == LX_RESUME && lx_sig_on(t->proc)) {
		lx_sig_broken_pipe(&c, (int64_t)regs->rax);
		lx_sig_deliver(&c);
	}
	if (!t->resume_exact && lx_sig_restart_code((int64_t)regs->rax))
		regs->rax = (uint64_t)-EINTR; /* never handed to the guest as it is */
	if (log_get_level() >= LOG_DEBUG)
		log_debug("syscall %s(%#llx, %#llx, %#llx) = %lld", lx_syscall_name((unsigned)c.nr),
			  (unsigned long long)c.a[0], (unsigned long long)c.a[1],
			  (unsigned long long)c.a[2], (long long)regs->rax);
	*segs_dirty = c.segs_dirty;
	return c.action;
}
