/*
 * vcpu_loop.c - a vCPU thread: run the program to its next exit, handle it, repeat.
 *
 * A guest `syscall` enters the one-instruction CPL0 stub whose `out` exits to us; we
 * run the call and return to CPL3 as SYSRET would, or with every register as the
 * personality left them when it gave the thread a new context (a signal handler's
 * entry, rt_sigreturn). Exceptions at CPL3 arrive the same way through the IDT stubs:
 * the program's signal handler runs, or the VM ends with a crash report, as a fatal
 * signal ends a process. Between exits the thread honours pauses and stops. The loop
 * says how it ended; the thread's own end (its process's, the VM's) is threads.c's.
 */
#include "vcpu_loop.h"
#include "crash.h"
#include "vm.h"
#include "../base/log.h"
#include "../base/x86.h"
#include "linux/lx.h"
#include "../mmu/cpu_tables.h"
#include "../mmu/layout.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

void vcpu_set_state(struct vcpu *vcpu, enum vcpu_state st)
{
	struct vm *vm = vcpu->vm;

	pthread_mutex_lock(&vm->lock);
	vcpu->state = st;
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
}

void vcpu_wait_begin(struct vcpu *vcpu)
{
	vcpu_set_state(vcpu, VCPU_BLOCKED);
}

void vcpu_wait_end(struct vcpu *vcpu)
{
	struct vm *vm = vcpu->vm;

	pthread_mutex_lock(&vm->lock);
	/* A pause that began while the call blocked records this vCPU as not having made
	 * the call yet (kvm_cpu_save): its result must not reach its registers (rax
	 * still holds the call's number) until the pause is over. */
	while (vm->pause_req && !vm->stop_req)
		pthread_cond_wait(&vm->cond, &vm->lock);
	vcpu->state = VCPU_MONITOR;
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
}

/* Between exits: honour a pause (park until resumed) or a stop. Returns true when the
 * vCPU must stop. The unlocked reads are a fast path; the decision is made locked. */
static bool vcpu_check_requests(struct vcpu *vcpu)
{
	struct vm *vm = vcpu->vm;
	bool stop;

	if (!__atomic_load_n(&vm->pause_req, __ATOMIC_ACQUIRE) &&
	    !__atomic_load_n(&vm->stop_req, __ATOMIC_ACQUIRE)) {
		/* Only this thread moves itself into GUEST; pause waits for the other states. */
		__atomic_store_n(&vcpu->state, VCPU_GUEST, __ATOMIC_RELEASE);
		return false;
	}
	pthread_mutex_lock(&vm->lock);
	while (vm->pause_req && !vm->stop_req) {
		vcpu->state = VCPU_PARKED;
		pthread_cond_broadcast(&vm->cond);
		pthread_cond_wait(&vm->cond, &vm->lock);
	}
	stop = vm->stop_req;
	/* DONE is set only when the thread ends (threads.c), its last use of the VM. */
	if (!stop)
		vcpu->state = VCPU_GUEST;
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
	return stop;
}

/* The first process's end ends the VM with @status, and another's ends that process
 * as its signal would (its parent sees it in wait4). */
static bool vcpu_ends_with(struct vcpu *vcpu, int status)
{
	struct lx_proc *p = vcpu->lx->proc;
	bool child = p && p != vcpu->vm->proc;

	if (!child) {
		vm_stop(vcpu->vm, status);
		return true;
	}
	p->exit_status = status;
	p->term_sig = status > 128 ? status - 128 : SIGKILL;
	vcpu->ends = VCPU_END_PROCESS;
	return true;
}

/* A report on what stopped the vCPU; then its process ends (vcpu_ends_with). */
static bool vcpu_crash(struct vcpu *vcpu, const struct cpu_exit *e, int vector, const char *what)
{
	struct lx_proc *p = vcpu->lx->proc;
	struct cpu_view v;
	bool child = p && p != vcpu->vm->proc;
	/* The frame is on this vCPU's CPL0 stack, in window 0's system area. */
	struct crash_ctx c = { .vcpu_id = vcpu->id, .mem = &vcpu->vm->ram, .exit = e,
			       .view = &v, .exe = p ? p->exe : NULL, .child_pid = child ? p->pid : 0 };
	int status;

	if (kvm_cpu_get(vcpu->cpu, &v))
		memset(&v, 0, sizeof(v));
	status = what ? crash_report_exit(&c, what) : crash_report_exception(&c, vector);
	return vcpu_ends_with(vcpu, status);
}

/* The program touched memory past --mem-total and has no SIGBUS handler: it ends
 * with SIGBUS, as a process whose page cannot be backed does. */
static bool vcpu_out_of_memory(struct vcpu *vcpu, uint64_t addr)
{
	struct lx_proc *p = vcpu->lx->proc;
	uint64_t charged = (uint64_t)aspace_set_charged(&vcpu->vm->spaces) * HUGE_SIZE;

	log_err("guest process %d (%s) touched %#llx past the VM's memory budget "
		"(--mem-total; %llu MiB in use): it ends with SIGBUS",
		p ? p->pid : 0, p ? p->exe : "?", (unsigned long long)addr,
		(unsigned long long)(charged >> 20));
	return vcpu_ends_with(vcpu, 128 + SIGBUS);
}

/* Into the guest over its process's page tables as they are now (an execve gave the
 * process a space of its own, a change in it moved its CR3: mmu/aspace.h). Marked as
 * running first, then the CR3 read: a change that moves it after the read finds the
 * vCPU running and kicks it (vm_flush), one before is seen here. */
static void vcpu_enter(struct vcpu *vcpu)
{
	struct aspace *as = vm_space_of(vcpu->vm, vcpu->lx->proc);
	uint64_t cr3;

	__atomic_store_n(&vcpu->in_run, true, __ATOMIC_SEQ_CST);
	if (vcpu->win != as->win) /* a new process on it, or its own window after exec */
		__atomic_store_n(&vcpu->win, as->win, __ATOMIC_SEQ_CST);
	cr3 = __atomic_load_n(&as->cr3, __ATOMIC_SEQ_CST);
	if (cr3 != vcpu->cr3 && !kvm_cpu_set_cr3(vcpu->cpu, cr3))
		vcpu->cr3 = cr3; /* else tried again before the next run */
}

static void vcpu_leave(struct vcpu *vcpu)
{
	__atomic_add_fetch(&vcpu->runs, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&vcpu->in_run, false, __ATOMIC_SEQ_CST);
}

/* The process of @vcpu ended (exit_group, a fatal signal): the VM with it when it is
 * the first, else that process alone. */
static void vcpu_process_ends(struct vcpu *vcpu)
{
	if (vcpu->lx->proc == vcpu->vm->proc)
		vm_stop(vcpu->vm, vcpu->vm->proc->exit_status);
	else
		vcpu->ends = VCPU_END_PROCESS;
}

/* Resume with the registers exactly as the personality left them (a signal handler's
 * entry, rt_sigreturn): as IRET to CPL3 would, with the flags a program may have. */
static void vcpu_resume_exact(struct vcpu *vcpu, struct cpu_regs *r, const struct cpu_segs *s)
{
	r->rflags = x86_user_rflags(r->rflags);
	kvm_cpu_put(vcpu->cpu, r, s);
}

/* Returns true when the vCPU must stop. */
static bool vcpu_handle_syscall(struct vcpu *vcpu, struct cpu_view *v)
{
	bool segs_dirty = false;
	enum lx_action act;

	stats_count(&vcpu->vm->stats.exits[EXIT_SYSCALL]);
	__atomic_store_n(&vcpu->state, VCPU_MONITOR, __ATOMIC_RELEASE);
	vcpu->in_syscall = true;
	act = lx_syscall(vcpu->lx, &v->regs, &v->segs, &segs_dirty);
	vcpu->in_syscall = false;
	if (act == LX_EXIT_THREAD) {
		vcpu->ends = VCPU_END_THREAD;
		return true;
	}
	if (act != LX_RESUME) {
		vcpu_process_ends(vcpu);
		return true;
	}
	if (vcpu->lx->resume_exact) {
		vcpu_resume_exact(vcpu, &v->regs, segs_dirty ? &v->segs : NULL);
	} else {
		x86_sysret_regs(&v->regs);
		kvm_cpu_put(vcpu->cpu, &v->regs, segs_dirty ? &v->segs : NULL);
	}
	return false;
}

/* A user page fault the monitor may owe the program (docs/processes.md):
 * - a write to a block the process shares with another since a fork faults with the
 *   page present: the block becomes its own;
 * - a touch of a block of its own not backed yet (a lazy space: mmu/aspace.h) faults
 *   with the page not present: the block is charged to --mem-total and mapped.
 * Either way the access is tried again. It may come from tables that a change has
 * replaced since: a kick for it can land while the CPU delivers the fault, and the stub
 * then reports it over the new tables. So a fault on a block that is fine already is
 * tried again too, a bounded number of times in a row at one page (more would be a
 * translation that never heals: the program's fault then). */
#define VCPU_MEM_RETRIES 64

enum vcpu_mem { VCPU_MEM_RETRY, VCPU_MEM_PROGRAM, VCPU_MEM_NOMEM };

static enum vcpu_mem vcpu_memory_fault(struct vcpu *vcpu, const struct lx_fault *f)
{
	struct aspace *as = vm_space_of(vcpu->vm, vcpu->lx->proc);
	bool cow = (f->error_code & (PF_ERR_P | PF_ERR_W)) == (PF_ERR_P | PF_ERR_W);
	uint64_t flush = 0;
	int rc;

	if (f->vector != X86_PF || !(f->error_code & PF_ERR_U) ||
	    (!cow && (f->error_code & PF_ERR_P)))
		return VCPU_MEM_PROGRAM;
	rc = aspace_write_fault(as, f->cr2, &flush);
	if (rc == -ENOMEM)
		return VCPU_MEM_NOMEM;
	if (rc)
		return VCPU_MEM_PROGRAM; /* not user memory */
	if (flush) {
		stats_count(cow ? &vcpu->vm->stats.cow_faults : &vcpu->vm->stats.touch_faults);
		vcpu->cow_retries = 0;
		return VCPU_MEM_RETRY;
	}
	if (f->cr2 / PAGE_SIZE != vcpu->cow_page) {
		vcpu->cow_page = f->cr2 / PAGE_SIZE;
		vcpu->cow_retries = 0;
	}
	return ++vcpu->cow_retries <= VCPU_MEM_RETRIES ? VCPU_MEM_RETRY : VCPU_MEM_PROGRAM;
}

/* A CPU exception in the program: its signal's handler runs (true), or false for the
 * crash report (no handler, or the stub was not entered from CPL3); @nomem set when
 * the signal was a SIGBUS for memory past the budget. */
static bool vcpu_exception_signal(struct vcpu *vcpu, struct cpu_view *v, int vector,
				  bool *nomem)
{
	struct crash_ctx c = { .vcpu_id = vcpu->id, .mem = &vcpu->vm->ram, .view = v };
	struct lx_fault f = { .vector = vector, .cr2 = v->cr2 };
	struct cpu_regs u = v->regs;
	struct crash_frame fr;

	if (crash_read_frame(&c, vector, &fr) || (fr.cs & 3) != 3)
		return false;
	/* The program's state is the frame the CPU pushed; its other registers are as
	 * the stub found them (it changes none before it exits). */
	u.rip = fr.rip;
	u.rsp = fr.rsp;
	u.rflags = fr.rflags;
	f.error_code = fr.error;
	switch (vcpu_memory_fault(vcpu, &f)) {
	case VCPU_MEM_RETRY:
		vcpu_resume_exact(vcpu, &u, NULL); /* the faulting instruction again */
		return true;
	case VCPU_MEM_NOMEM:
		f.nomem = *nomem = true;
		break;
	case VCPU_MEM_PROGRAM:
		break;
	}
	if (!lx_fault(vcpu->lx, &u, &v->segs, &f))
		return false;
	vcpu_resume_exact(vcpu, &u, NULL);
	return true;
}

/* Signals for this thread that came while it ran the program (it was kicked out of
 * its run): taken now if it is in user code, else at its next system call's return.
 * Returns true when the VM stops (a signal ended the program). */
static bool vcpu_pending_signals(struct vcpu *vcpu)
{
	struct cpu_view v;
	enum lx_action act;

	if (!lx_sig_waiting(vcpu->lx) || kvm_cpu_get(vcpu->cpu, &v))
		return false;
	/* In the stub page (PVM runs the syscall stub at CPL3) the call is under way. */
	if (v.cpl != 3 || (v.regs.rip >= LAYOUT_STUBS && v.regs.rip < LAYOUT_STUBS + PAGE_SIZE))
		return false;
	act = lx_sig_interrupt(vcpu->lx, &v.regs, &v.segs);
	if (act != LX_RESUME) {
		vcpu_process_ends(vcpu);
		return true;
	}
	vcpu_resume_exact(vcpu, &v.regs, NULL);
	return false;
}

static bool vcpu_handle_io(struct vcpu *vcpu, const struct cpu_exit *e)
{
	struct cpu_view v;
	bool nomem = false;
	int stub = -2;

	if (kvm_cpu_get(vcpu->cpu, &v))
		return vcpu_crash(vcpu, e, 0, "registers unreadable");
	/* Only our own stubs may talk to the monitor: the syscall stub (at CPL3 on PVM
	 * hosts; jumping to it directly is just another way to make a system call) and
	 * the exception stubs, which count only when the CPU entered them at CPL0. */
	if (e->out && e->port == STUB_PORT)
		stub = cpu_stub_at(v.regs.rip);
	if (stub >= 0 && v.cpl != 0)
		stub = -2;
	if (stub == -1)
		return vcpu_handle_syscall(vcpu, &v);
	if (stub >= 0) {
		stats_count(&vcpu->vm->stats.exits[EXIT_EXCEPTION]);
		if (vcpu_exception_signal(vcpu, &v, stub, &nomem))
			return false;
		if (nomem)
			return vcpu_out_of_memory(vcpu, v.cr2);
		return vcpu_crash(vcpu, e, stub, NULL);
	}
	stats_count(&vcpu->vm->stats.exits[EXIT_IO_OTHER]);
	return vcpu_crash(vcpu, e, 0, "unexpected port I/O");
}

/* Returns true when the vCPU must stop. */
static bool vcpu_handle_exit(struct vcpu *vcpu, const struct cpu_exit *e)
{
	static const struct {
		enum exit_kind stat;
		const char *what;
	} fatal[] = {
		[CPU_EXIT_HLT] = { EXIT_HLT, "halted at CPL0" },
		[CPU_EXIT_SHUTDOWN] = { EXIT_SHUTDOWN, "triple fault (shutdown)" },
		[CPU_EXIT_INTERNAL] = { EXIT_INTERNAL, "KVM internal error" },
		[CPU_EXIT_FAIL_ENTRY] = { EXIT_FAIL_ENTRY, "VM entry failed" },
		[CPU_EXIT_MMIO] = { EXIT_MMIO, "access outside guest RAM (MMIO)" },
		[CPU_EXIT_OTHER] = { EXIT_OTHER, "unexpected VM exit" },
	};

	if (e->kind == CPU_EXIT_IO)
		return vcpu_handle_io(vcpu, e);
	if (e->kind == CPU_EXIT_INTR) {
		stats_count(&vcpu->vm->stats.exits[EXIT_KICK]);
		return false;
	}
	stats_count(&vcpu->vm->stats.exits[fatal[e->kind].stat]);
	return vcpu_crash(vcpu, e, 0, fatal[e->kind].what);
}

enum vcpu_end vcpu_loop(struct vcpu *vcpu)
{
	struct vm *vm = vcpu->vm;
	struct cpu_exit e;
	int rc;

	vcpu->ends = VCPU_END_VM;
	while (!vcpu_check_requests(vcpu)) {
		if (__atomic_load_n(&vcpu->quit, __ATOMIC_ACQUIRE)) {
			vcpu->ends = VCPU_END_THREAD; /* its process ended in another thread */
			break;
		}
		vcpu_enter(vcpu);
		rc = kvm_cpu_run(vcpu->cpu, &e);
		vcpu_leave(vcpu);
		if (rc) {
			log_err("running vCPU %d: %s", vcpu->id, strerror(-rc));
			vm_stop(vm, 1);
			break;
		}
		/* Kicked: a pause, a stop, or a signal for this thread to take now. */
		if (e.kind == CPU_EXIT_KICK) {
			stats_count(&vm->stats.exits[EXIT_KICK]);
			if (vcpu_pending_signals(vcpu))
				break;
			continue;
		}
		if (vcpu_handle_exit(vcpu, &e))
			break;
	}
	return vcpu->ends;
}
