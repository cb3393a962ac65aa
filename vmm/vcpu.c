/*
 * vcpu.c - a vCPU that runs a Linux program at CPL3, and its exit loop.
 *
 * The vCPU starts directly in 64-bit user mode (no boot code: guest kernel mode is
 * emulated and slow on our hosts). A guest `syscall` enters the one-instruction CPL0
 * stub whose `out` exits to us; we run the call and return to CPL3 by rewriting RIP,
 * RFLAGS, CS and SS in the kvm_run sync-register area (KVM_CAP_SYNC_REGS), which costs
 * no extra ioctl. Exceptions at CPL3 arrive the same way through the IDT stubs and end
 * the VM with a crash report, as a fatal signal ends a process.
 *
 * Kicks (pause, stop) follow the usual KVM pattern: set immediate_exit, then signal
 * the thread, so a kick that lands just before KVM_RUN is not lost.
 */
#include "vcpu.h"
#include "role.h"
#include "cpu_tables.h"
#include "crash.h"
#include "log.h"
#include "vm.h"
#include "x86.h"
#include "linux/lx.h"
#include "../mmu/layout.h"

#include <cpuid.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <x86intrin.h>

_Static_assert(VM_MAX_VCPUS <= LAYOUT_MAX_VCPUS, "a TSS and an exception stack for every vCPU");

/* Not SIGUSR1: the signals ccvm receives go to the guest (sigfwd.c). */
#define VCPU_KICK_SIGNAL (SIGRTMIN + 1)
/* A guest signal for the thread: ends the host call it blocks in with EINTR (so no
 * SA_RESTART) or its KVM_RUN. Apart from the pause kick, whose host calls restart. */
#define VCPU_SIGNAL_KICK (SIGRTMIN + 2)
#define VCPU_XSAVE_LEAF  0xD
#define FPU_FCW_DEFAULT  0x37F
#define MXCSR_DEFAULT    0x1F80
/* SYSCALL clears these in RFLAGS on entry to the stub (Linux masks the same). */

static void vcpu_seg_user_code(struct kvm_segment *s)
{
	*s = (struct kvm_segment){ .base = 0, .limit = 0xFFFFFFFF, .selector = GDT_USER_CS,
				   .type = SEG_TYPE_CODE_XR, .present = 1, .dpl = 3, .db = 0,
				   .s = 1, .l = 1, .g = 1 };
}

static void vcpu_seg_user_data(struct kvm_segment *s, uint64_t base)
{
	*s = (struct kvm_segment){ .base = base, .limit = 0xFFFFFFFF, .selector = GDT_USER_DS,
				   .type = SEG_TYPE_DATA_RW, .present = 1, .dpl = 3, .db = 1,
				   .s = 1, .l = 0, .g = 1 };
}

/* The task register of vCPU @vcpu: its own TSS, so its own exception stack. */
static void vcpu_own_tr(const struct vcpu *vcpu, struct kvm_segment *tr)
{
	*tr = (struct kvm_segment){ .base = cpu_tss_base(vcpu->id), .limit = cpu_tss_limit(vcpu->id),
				    .selector = GDT_TSS, .type = SEG_TYPE_TSS_BUSY, .present = 1,
				    .g = 0 };
}

static int vcpu_setup_sregs(struct vcpu *vcpu, const struct vcpu_entry *entry)
{
	struct kvm_sregs sr;

	if (ioctl(vcpu->fd, KVM_GET_SREGS, &sr) < 0)
		return -errno;
	vcpu_seg_user_code(&sr.cs);
	vcpu_seg_user_data(&sr.ss, 0);
	vcpu_seg_user_data(&sr.ds, 0);
	vcpu_seg_user_data(&sr.es, 0);
	vcpu_seg_user_data(&sr.fs, entry->fs_base);
	vcpu_seg_user_data(&sr.gs, entry->gs_base);
	vcpu_own_tr(vcpu, &sr.tr);
	sr.ldt = (struct kvm_segment){ .unusable = 1 };
	sr.gdt.base = LAYOUT_GDT;
	sr.gdt.limit = GDT_LIMIT;
	sr.idt.base = LAYOUT_IDT;
	sr.idt.limit = IDT_LIMIT;
	sr.cr0 = CR0_PE | CR0_MP | CR0_ET | CR0_NE | CR0_WP | CR0_AM | CR0_PG;
	sr.cr3 = vcpu->vm->cr3;
	sr.cr4 = CR4_PAE | CR4_OSFXSR | CR4_OSXMMEXCPT | CR4_OSXSAVE;
	sr.efer = EFER_LME | EFER_LMA | EFER_SCE | EFER_NXE;
	if (ioctl(vcpu->fd, KVM_SET_SREGS, &sr) < 0)
		return -errno;
	return 0;
}

static int vcpu_setup_msrs(struct vcpu *vcpu)
{
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e[VCPU_FIXED_MSRS];
	} m = { .hdr.nmsrs = VCPU_FIXED_MSRS };

	memcpy(m.e, vcpu_fixed_msrs, sizeof(m.e));
	if (ioctl(vcpu->fd, KVM_SET_MSRS, &m) != VCPU_FIXED_MSRS)
		return -EIO;
	return 0;
}

static int vcpu_setup_fpu(struct vcpu *vcpu)
{
	struct kvm_xcrs xcrs = { .nr_xcrs = 1, .xcrs[0] = { .xcr = 0, .value = vcpu->vm->xcr0 } };
	struct kvm_fpu fpu = { .fcw = FPU_FCW_DEFAULT, .mxcsr = MXCSR_DEFAULT };

	if (ioctl(vcpu->fd, KVM_SET_XCRS, &xcrs) < 0)
		return -errno;
	if (ioctl(vcpu->fd, KVM_SET_FPU, &fpu) < 0)
		return -errno;
	return 0;
}

static int vcpu_setup_regs(struct vcpu *vcpu, const struct vcpu_entry *entry)
{
	struct kvm_regs r = { .rip = entry->rip, .rsp = entry->rsp,
			      .rflags = RFLAGS_FIXED | RFLAGS_IF };

	if (ioctl(vcpu->fd, KVM_SET_REGS, &r) < 0)
		return -errno;
	return 0;
}

static int vcpu_setup(struct vcpu *vcpu, const struct vcpu_entry *entry)
{
	int rc;

	if (ioctl(vcpu->fd, KVM_SET_CPUID2, vcpu->vm->cpuid) < 0) {
		rc = -errno;
		log_err("KVM_SET_CPUID2: %s", strerror(errno));
		return rc;
	}
	if ((rc = vcpu_setup_sregs(vcpu, entry)) || (rc = vcpu_setup_msrs(vcpu)) ||
	    (rc = vcpu_setup_fpu(vcpu)) || (rc = vcpu_setup_regs(vcpu, entry))) {
		log_err("setting up vCPU %d for user mode: %s", vcpu->id, strerror(-rc));
		return rc;
	}
	vcpu->run->kvm_valid_regs = KVM_SYNC_X86_REGS | KVM_SYNC_X86_SREGS;
	return 0;
}

int vcpu_set_user(struct vcpu *vcpu, const struct kvm_regs *regs, const struct vcpu_entry *entry,
		  const struct kvm_xsave *xsave)
{
	int rc = vcpu_setup_sregs(vcpu, entry);

	if (rc)
		return rc;
	if (ioctl(vcpu->fd, KVM_SET_REGS, regs) < 0 || ioctl(vcpu->fd, KVM_SET_XSAVE, xsave) < 0)
		return -errno;
	/* Registers a finished thread left in the sync area must not overwrite these. */
	vcpu->run->kvm_dirty_regs = 0;
	return 0;
}

void vcpu_sysret_regs(struct kvm_regs *r)
{
	r->rip = r->rcx;
	r->rflags = x86_user_rflags(r->r11);
}

int vcpu_create(struct vm *vm, int id, const struct vcpu_entry *entry, struct vcpu **out)
{
	struct vcpu *vcpu = calloc(1, sizeof(*vcpu));
	int rc;

	if (!vcpu)
		return -ENOMEM;
	vcpu->vm = vm;
	vcpu->id = id;
	vcpu->lx = &vcpu->thread_state;
	vcpu->run = MAP_FAILED;
	vcpu->fd = ioctl(vm->fd, KVM_CREATE_VCPU, id);
	if (vcpu->fd < 0) {
		rc = -errno;
		log_err("KVM_CREATE_VCPU %d: %s", id, strerror(errno));
		goto err_free;
	}
	vcpu->run = mmap(NULL, (size_t)vm->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu->fd,
			 0);
	if (vcpu->run == MAP_FAILED) {
		rc = -errno;
		log_err("mmap of the kvm_run area: %s", strerror(errno));
		goto err_close;
	}
	rc = vcpu_setup(vcpu, entry);
	if (rc)
		goto err_unmap;
	*out = vcpu;
	return 0;

err_unmap:
	munmap(vcpu->run, (size_t)vm->run_size);
err_close:
	close(vcpu->fd);
err_free:
	free(vcpu);
	return rc;
}

void vcpu_destroy(struct vcpu *vcpu)
{
	if (!vcpu)
		return;
	munmap(vcpu->run, (size_t)vcpu->vm->run_size);
	close(vcpu->fd);
	free(vcpu);
}

int vcpu_tsc_offset(struct vcpu *vcpu, int64_t *offset)
{
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e;
	} m = { .hdr.nmsrs = 1, .e.index = MSR_IA32_TSC };
	uint64_t before, after;

	before = __rdtsc();
	if (ioctl(vcpu->fd, KVM_GET_MSRS, &m) != 1)
		return -EIO;
	after = __rdtsc();
	*offset = (int64_t)(m.e.data - (before + (after - before) / 2));
	return 0;
}

static void vcpu_kick_handler(int sig)
{
	(void)sig; /* only there to interrupt KVM_RUN (and, for signals, host calls) */
}

void vcpu_signal_kick(void *v)
{
	struct vcpu *vcpu = v;

	if (!vcpu)
		return;
	__atomic_store_n(&vcpu->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
	pthread_kill(vcpu->thread, VCPU_SIGNAL_KICK);
}

/* Bytes of the standard XSAVE area for what the host enabled (CPUID 0xD.0 EBX), at
 * most what KVM_GET_XSAVE gives: what a signal frame holds. */
static size_t vcpu_xsave_size(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid_count(VCPU_XSAVE_LEAF, 0, &a, &b, &c, &d) || b < 576)
		return sizeof(struct kvm_xsave);
	return b < sizeof(struct kvm_xsave) ? b : sizeof(struct kvm_xsave);
}

int vcpu_fpu_save(void *v, void *buf, size_t cap, uint64_t *xfeatures)
{
	struct vcpu *vcpu = v;
	struct kvm_xsave xs;
	struct kvm_xcrs xcrs;
	size_t len = vcpu_xsave_size();

	if (ioctl(vcpu->fd, KVM_GET_XSAVE, &xs) < 0 || ioctl(vcpu->fd, KVM_GET_XCRS, &xcrs) < 0)
		return -errno;
	if (len > cap)
		return -ENOSPC;
	*xfeatures = 0;
	for (unsigned i = 0; i < xcrs.nr_xcrs && i < KVM_MAX_XCRS; i++)
		if (xcrs.xcrs[i].xcr == 0)
			*xfeatures = xcrs.xcrs[i].value;
	memcpy(buf, &xs, len);
	return (int)len;
}

int vcpu_fpu_load(void *v, const void *buf, size_t len)
{
	struct vcpu *vcpu = v;
	struct kvm_xsave xs;

	if (len > sizeof(xs))
		return -EINVAL;
	memset(&xs, 0, sizeof(xs));
	memcpy(&xs, buf, len);
	return ioctl(vcpu->fd, KVM_SET_XSAVE, &xs) < 0 ? -errno : 0;
}

void vcpu_kick(struct vcpu *vcpu)
{
	__atomic_store_n(&vcpu->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
	pthread_kill(vcpu->thread, VCPU_KICK_SIGNAL);
}

static void vcpu_set_state(struct vcpu *vcpu, enum vcpu_state st)
{
	struct vm *vm = vcpu->vm;

	pthread_mutex_lock(&vm->lock);
	vcpu->state = st;
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
}

void vcpu_block_begin(struct vcpu *vcpu)
{
	vcpu_set_state(vcpu, VCPU_BLOCKED);
}

void vcpu_block_end(struct vcpu *vcpu)
{
	struct vm *vm = vcpu->vm;

	pthread_mutex_lock(&vm->lock);
	/* A pause that began while the call blocked records this vCPU as not having made
	 * the call yet (vcpu_save_state): its result must not reach its registers (rax
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
	/* DONE is set only when the thread ends (vcpu_thread), its last use of the VM. */
	if (!stop)
		vcpu->state = VCPU_GUEST;
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
	return stop;
}

/* Back to the program at CPL3 with the registers in the sync area: on PVM hosts the
 * stub already runs at CPL3; where `syscall` (or an exception) entered CPL0, CS and
 * SS go back to the user selectors too. */
static void vcpu_to_user(struct kvm_run *run, bool sregs_dirty)
{
	struct kvm_sregs *sr = &run->s.regs.sregs;

	run->kvm_dirty_regs |= KVM_SYNC_X86_REGS;
	if (sr->cs.dpl != 3) {
		vcpu_seg_user_code(&sr->cs);
		vcpu_seg_user_data(&sr->ss, 0);
		sregs_dirty = true;
	}
	if (sregs_dirty)
		run->kvm_dirty_regs |= KVM_SYNC_X86_SREGS;
}

/* Return from the syscall stub to the program the way SYSRET would: only RIP and
 * RFLAGS change (from RCX and R11). */
static void vcpu_sysret(struct kvm_run *run, bool sregs_dirty)
{
	vcpu_sysret_regs(&run->s.regs.regs);
	run->kvm_dirty_regs = 0;
	vcpu_to_user(run, sregs_dirty);
}

/* Resume with the registers exactly as the personality left them (a signal handler's
 * entry, rt_sigreturn): as IRET to CPL3 would, with the flags a program may have. */
static void vcpu_resume_exact(struct kvm_run *run, bool sregs_dirty)
{
	struct kvm_regs *r = &run->s.regs.regs;

	r->rflags = x86_user_rflags(r->rflags);
	vcpu_to_user(run, sregs_dirty);
}

/* Returns true when the vCPU must stop. */
static bool vcpu_handle_syscall(struct vcpu *vcpu)
{
	struct kvm_run *run = vcpu->run;
	bool sregs_dirty = false;
	enum lx_action act;

	stats_count(&vcpu->vm->stats.exits[EXIT_SYSCALL]);
	__atomic_store_n(&vcpu->state, VCPU_MONITOR, __ATOMIC_RELEASE);
	vcpu->in_syscall = true;
	act = lx_syscall(vcpu->lx, &run->s.regs.regs, &run->s.regs.sregs, &sregs_dirty);
	vcpu->in_syscall = false;
	if (act == LX_EXIT_THREAD) {
		vm_thread_exit(vcpu);
		return true;
	}
	if (act != LX_RESUME) {
		vm_stop(vcpu->vm, vcpu->vm->proc->exit_status);
		return true;
	}
	if (vcpu->lx->resume_exact)
		vcpu_resume_exact(run, sregs_dirty);
	else
		vcpu_sysret(run, sregs_dirty);
	return false;
}

/* A CPU exception in the program: its signal's handler runs (true), or false for the
 * crash report (no handler, or the stub was not entered from CPL3). */
static bool vcpu_exception_signal(struct vcpu *vcpu, int vector)
{
	struct kvm_run *run = vcpu->run;
	struct kvm_regs u = run->s.regs.regs;
	struct kvm_sregs *sr = &run->s.regs.sregs;
	struct lx_fault f = { .vector = vector, .cr2 = sr->cr2 };
	struct crash_frame fr;

	if (crash_read_frame(vcpu, vector, &fr) || (fr.cs & 3) != 3)
		return false;
	/* The program's state is the frame the CPU pushed; its other registers are as
	 * the stub found them (it changes none before it exits). */
	u.rip = fr.rip;
	u.rsp = fr.rsp;
	u.rflags = fr.rflags;
	f.error_code = fr.error;
	if (!lx_fault(vcpu->lx, &u, sr, &f))
		return false;
	run->s.regs.regs = u;
	vcpu_resume_exact(run, false);
	return true;
}

/* Signals for this thread that came while it ran the program (it was kicked out of
 * KVM_RUN): taken now if it is in user code, else at its next system call's return.
 * Returns true when the VM stops (a signal ended the program). */
static bool vcpu_pending_signals(struct vcpu *vcpu)
{
	struct kvm_run *run = vcpu->run;
	enum lx_action act;

	if (!lx_sig_waiting(vcpu->lx))
		return false;
	/* The sync area holds the state KVM_RUN left (or will load: edited registers). */
	if (!(run->kvm_dirty_regs & KVM_SYNC_X86_REGS) &&
	    ioctl(vcpu->fd, KVM_GET_REGS, &run->s.regs.regs) < 0)
		return false;
	if (!(run->kvm_dirty_regs & KVM_SYNC_X86_SREGS) &&
	    ioctl(vcpu->fd, KVM_GET_SREGS, &run->s.regs.sregs) < 0)
		return false;
	/* In the stub page (PVM runs the syscall stub at CPL3) the call is under way. */
	if (run->s.regs.sregs.cs.dpl != 3 ||
	    (run->s.regs.regs.rip >= LAYOUT_STUBS && run->s.regs.regs.rip < LAYOUT_STUBS + PAGE_SIZE))
		return false;
	act = lx_sig_interrupt(vcpu->lx, &run->s.regs.regs, &run->s.regs.sregs);
	if (act != LX_RESUME) {
		vm_stop(vcpu->vm, vcpu->vm->proc->exit_status);
		return true;
	}
	vcpu_resume_exact(run, false);
	return false;
}

static bool vcpu_handle_io(struct vcpu *vcpu)
{
	struct kvm_run *run = vcpu->run;
	struct kvm_regs *r = &run->s.regs.regs;
	int stub = -2;

	/* Only our own stubs may talk to the monitor: the syscall stub (at CPL3 on PVM
	 * hosts; jumping to it directly is just another way to make a system call) and
	 * the exception stubs, which count only when the CPU entered them at CPL0. */
	if (run->io.direction == KVM_EXIT_IO_OUT && run->io.port == STUB_PORT)
		stub = cpu_stub_at(r->rip);
	if (stub >= 0 && run->s.regs.sregs.cs.dpl != 0)
		stub = -2;
	if (stub == -1)
		return vcpu_handle_syscall(vcpu);
	if (stub >= 0) {
		stats_count(&vcpu->vm->stats.exits[EXIT_EXCEPTION]);
		if (vcpu_exception_signal(vcpu, stub))
			return false;
		vm_stop(vcpu->vm, crash_report_exception(vcpu, stub));
		return true;
	}
	stats_count(&vcpu->vm->stats.exits[EXIT_IO_OTHER]);
	vm_stop(vcpu->vm, crash_report_exit(vcpu, "unexpected port I/O"));
	return true;
}

/* Returns true when the vCPU must stop. */
static bool vcpu_handle_exit(struct vcpu *vcpu)
{
	struct vm_stats *st = &vcpu->vm->stats;

	switch (vcpu->run->exit_reason) {
	case KVM_EXIT_IO:
		return vcpu_handle_io(vcpu);
	case KVM_EXIT_INTR:
		stats_count(&st->exits[EXIT_KICK]);
		return false;
	case KVM_EXIT_HLT:
		stats_count(&st->exits[EXIT_HLT]);
		vm_stop(vcpu->vm, crash_report_exit(vcpu, "halted at CPL0"));
		return true;
	case KVM_EXIT_SHUTDOWN:
		stats_count(&st->exits[EXIT_SHUTDOWN]);
		vm_stop(vcpu->vm, crash_report_exit(vcpu, "triple fault (KVM_EXIT_SHUTDOWN)"));
		return true;
	case KVM_EXIT_INTERNAL_ERROR:
		stats_count(&st->exits[EXIT_INTERNAL]);
		vm_stop(vcpu->vm, crash_report_exit(vcpu, "KVM internal error"));
		return true;
	case KVM_EXIT_FAIL_ENTRY:
		stats_count(&st->exits[EXIT_FAIL_ENTRY]);
		vm_stop(vcpu->vm, crash_report_exit(vcpu, "VM entry failed"));
		return true;
	case KVM_EXIT_MMIO:
		stats_count(&st->exits[EXIT_MMIO]);
		vm_stop(vcpu->vm, crash_report_exit(vcpu, "access outside guest RAM (MMIO)"));
		return true;
	default:
		stats_count(&st->exits[EXIT_OTHER]);
		vm_stop(vcpu->vm, crash_report_exit(vcpu, "unexpected VM exit"));
		return true;
	}
}

static void vcpu_thread_signals(void)
{
	struct sigaction sa = { .sa_handler = vcpu_kick_handler, .sa_flags = SA_RESTART };
	struct sigaction sk = { .sa_handler = vcpu_kick_handler }; /* no SA_RESTART */
	sigset_t set;

	sigemptyset(&sa.sa_mask);
	sigaction(VCPU_KICK_SIGNAL, &sa, NULL);
	sigemptyset(&sk.sa_mask);
	sigaction(VCPU_SIGNAL_KICK, &sk, NULL);
	sigemptyset(&set);
	sigaddset(&set, VCPU_KICK_SIGNAL);
	sigaddset(&set, VCPU_SIGNAL_KICK);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

void *vcpu_thread(void *arg)
{
	struct vcpu *vcpu = arg;
	struct vm *vm = vcpu->vm;

	role_enter(ROLE_VCPU);
	vcpu_thread_signals();
	while (!vcpu_check_requests(vcpu)) {
		if (ioctl(vcpu->fd, KVM_RUN, 0) < 0) {
			if (errno == EINTR || errno == EAGAIN) {
				__atomic_store_n(&vcpu->run->immediate_exit, 0, __ATOMIC_SEQ_CST);
				stats_count(&vm->stats.exits[EXIT_KICK]);
				if (vcpu_pending_signals(vcpu))
					break;
				continue;
			}
			log_err("KVM_RUN on vCPU %d: %s", vcpu->id, strerror(errno));
			vm_stop(vm, 1);
			break;
		}
		if (vcpu_handle_exit(vcpu))
			break;
	}
	vcpu_set_state(vcpu, VCPU_DONE);
	return NULL;
}

int vcpu_save_state(struct vcpu *vcpu, struct vcpu_saved *st)
{
	struct kvm_run *run = vcpu->run;
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e[8];
	} m = { .hdr.nmsrs = VCPU_FIXED_MSRS };

	memset(st, 0, sizeof(*st));
	st->magic = VCPU_STATE_MAGIC;
	st->size = sizeof(*st);
	/* Registers edited after the last exit live in the sync area until the next
	 * KVM_RUN applies them: that is the state the guest will resume with. */
	if (run->kvm_dirty_regs & KVM_SYNC_X86_REGS || vcpu->in_syscall)
		st->regs = run->s.regs.regs;
	else if (ioctl(vcpu->fd, KVM_GET_REGS, &st->regs) < 0)
		return -errno;
	if (run->kvm_dirty_regs & KVM_SYNC_X86_SREGS || vcpu->in_syscall)
		st->sregs = run->s.regs.sregs;
	else if (ioctl(vcpu->fd, KVM_GET_SREGS, &st->sregs) < 0)
		return -errno;
	if (vcpu->in_syscall) {
		/* Blocked in a system call: record the moment before the `syscall`
		 * instruction (2 bytes), so the restored guest makes the call again. */
		vcpu_sysret_regs(&st->regs);
		st->regs.rip -= 2;
		vcpu_seg_user_code(&st->sregs.cs);
		vcpu_seg_user_data(&st->sregs.ss, 0);
	}
	if (ioctl(vcpu->fd, KVM_GET_XSAVE, &st->xsave) < 0 ||
	    ioctl(vcpu->fd, KVM_GET_XCRS, &st->xcrs) < 0 ||
	    ioctl(vcpu->fd, KVM_GET_VCPU_EVENTS, &st->events) < 0)
		return -errno;
	/* The MSRs a CPL3 guest depends on beyond the segment state. */
	for (unsigned i = 0; i < VCPU_FIXED_MSRS; i++)
		m.e[i].index = vcpu_fixed_msrs[i].index;
	if (ioctl(vcpu->fd, KVM_GET_MSRS, &m) != VCPU_FIXED_MSRS)
		return -EIO;
	st->n_msrs = VCPU_FIXED_MSRS;
	memcpy(st->msrs, m.e, sizeof(m.e[0]) * VCPU_FIXED_MSRS);
	return 0;
}

int vcpu_load_state(struct vcpu *vcpu, const struct vcpu_saved *st)
{
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e[8];
	} m = { .hdr.nmsrs = st->n_msrs };
	struct kvm_regs regs = st->regs;
	struct kvm_sregs sregs = st->sregs;

	if (st->magic != VCPU_STATE_MAGIC || st->size != sizeof(*st) || st->n_msrs > 8)
		return -EINVAL;
	memcpy(m.e, st->msrs, sizeof(m.e[0]) * st->n_msrs);
	/* A return to CPL3 like any other, whatever vcpu_saved_check let through. */
	regs.rflags = x86_user_rflags(regs.rflags);
	/* This vCPU's own TSS and exception stack, whichever the image names. */
	vcpu_own_tr(vcpu, &sregs.tr);
	if (ioctl(vcpu->fd, KVM_SET_SREGS, &sregs) < 0 ||
	    ioctl(vcpu->fd, KVM_SET_REGS, &regs) < 0 ||
	    ioctl(vcpu->fd, KVM_SET_XCRS, &st->xcrs) < 0 ||
	    ioctl(vcpu->fd, KVM_SET_XSAVE, &st->xsave) < 0 ||
	    ioctl(vcpu->fd, KVM_SET_VCPU_EVENTS, &st->events) < 0)
		return -errno;
	if (ioctl(vcpu->fd, KVM_SET_MSRS, &m) != (int)st->n_msrs)
		return -EIO;
	vcpu->run->kvm_dirty_regs = 0;
	return 0;
}
