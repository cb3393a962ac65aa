/*
 * threads.c - guest threads as vCPUs.
 *
 * Every guest thread runs on a vCPU of its own, and every vCPU on a host thread of its
 * own, so guest threads run in parallel and block independently. A clone takes a
 * vCPU whose thread has finished (KVM cannot destroy a vCPU, and a program that
 * starts and joins threads in a loop would otherwise run out) or creates one, up to
 * the --vcpus cap; past it the clone fails with EAGAIN, as Linux' thread limit would,
 * and the reason is logged once. The new vCPU starts where its creator's clone
 * returns, with its creator's registers, FPU and vector state (as Linux copies them),
 * rax 0, its own stack and TLS base.
 *
 * Pauses stay exact with threads coming and going: a vCPU joins the VM's list and is
 * marked as running guest code under vm->lock before its host thread starts, so a
 * pause either sees it and waits for it to park, or began earlier and finds the
 * creator still in the monitor (a pause waits for that too).
 */
#include "vm.h"
#include "../base/log.h"
#include "../base/mono.h"
#include "../base/role.h"
#include "vcpu.h"
#include "vcpu_loop.h"
#include "linux/ptree.h"
#include "../mmu/layout.h"
#include "../mmu/vma.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* A vCPU for a new thread: a finished one, else a new one. Caller holds vm->lock. */
static int vm_thread_vcpu(struct vm *vm, struct vcpu **out)
{
	static bool cap_logged;
	int rc;

	for (int i = 0; i < vm->n_vcpus; i++) {
		struct vcpu *v = vm->vcpus[i];

		if (v->state != VCPU_DONE)
			continue;
		if (v->joinable)
			pthread_join(v->thread, NULL); /* it is past its last use of the VM */
		v->joinable = false;
		*out = v;
		return 0;
	}
	if (vm->n_vcpus >= vm->max_vcpus) {
		if (!__atomic_exchange_n(&cap_logged, true, __ATOMIC_RELAXED))
			log_warn("guest thread refused: the guest already runs %d threads, the most "
				 "--vcpus %d allows (clone returns EAGAIN)",
				 vm->n_threads, vm->max_vcpus);
		return -EAGAIN;
	}
	rc = vcpu_create(vm, vm->kvm, vm->n_vcpus, &(struct cpu_entry){ 0 }, out);
	if (rc)
		return rc == -ENOMEM ? -ENOMEM : -EAGAIN;
	(*out)->state = VCPU_DONE;
	vm->vcpus[vm->n_vcpus] = *out; /* (published for vm_guest_cpu_ns, which takes no lock) */
	__atomic_store_n(&vm->n_vcpus, vm->n_vcpus + 1, __ATOMIC_RELEASE);
	return 0;
}

/* A vCPU's host thread: its loop, then the end the loop reported. DONE is its last
 * use of the VM. */
static void *vm_vcpu_thread(void *arg)
{
	struct vcpu *vcpu = arg;

	role_enter(ROLE_VCPU);
	vcpu_thread_signals();
	switch (vcpu_loop(vcpu)) {
	case VCPU_END_THREAD:
		vm_thread_exit(vcpu);
		break;
	case VCPU_END_PROCESS:
		vm_process_exit(vcpu);
		break;
	case VCPU_END_VM:
		break;
	}
	/* The clock ends with the thread: its time is kept (vm_guest_cpu_ns). */
	__atomic_store_n(&vcpu->clocked, false, __ATOMIC_RELEASE);
	__atomic_fetch_add(&vcpu->vm->cpu_done_ns, mono_thread_cpu_ns(), __ATOMIC_RELAXED);
	vcpu_set_state(vcpu, VCPU_DONE);
	return NULL;
}

/* Start @vcpu's host thread. Caller holds vm->lock. */
static int vm_thread_start(struct vm *vm, struct vcpu *vcpu)
{
	vcpu->state = VCPU_GUEST;
	vcpu->quit = false;
	if (pthread_create(&vcpu->thread, NULL, vm_vcpu_thread, vcpu)) {
		vcpu->state = VCPU_DONE;
		return -EAGAIN;
	}
	vcpu->joinable = true;
	if (!pthread_getcpuclockid(vcpu->thread, &vcpu->clock))
		__atomic_store_n(&vcpu->clocked, true, __ATOMIC_RELEASE);
	vm->n_threads++;
	vcpu->lx->proc->vm_threads++;
	return 0;
}

/* The host thread vm->start_req asks for, started (vm->lock held). */
static void vm_serve_start(struct vm *vm)
{
	vm->start_rc = vm_thread_start(vm, vm->start_req);
	vm->start_req = NULL;
	pthread_cond_broadcast(&vm->cond);
}

/* Without vm->lock: its caller, the compactor, runs under SCHED_IDLE, and preempted
 * while holding the lock it would stall every vCPU that wants it (a blocking call
 * takes it) for as long as the busy cores keep it off. A thread ending meanwhile may
 * be counted twice or not at all in one reading; the compactor's look takes that as
 * one span's error. vCPUs are never freed before the VM, and the engine (with its
 * compactor) stops first. */
uint64_t vm_guest_cpu_ns(void *arg)
{
	struct vm *vm = arg;
	int n = __atomic_load_n(&vm->n_vcpus, __ATOMIC_ACQUIRE);
	uint64_t ns = __atomic_load_n(&vm->cpu_done_ns, __ATOMIC_RELAXED);

	for (int i = 0; i < n; i++) {
		struct vcpu *v = vm->vcpus[i];

		if (__atomic_load_n(&v->clocked, __ATOMIC_ACQUIRE))
			ns += mono_clock_ns(v->clock);
	}
	return ns;
}

int vm_wait_stopped(struct vm *vm)
{
	int status;

	pthread_mutex_lock(&vm->lock);
	while (!vm->stop_req || !vm_all_quiet(vm, false)) {
		if (vm->start_req) {
			vm_serve_start(vm);
			continue;
		}
		pthread_cond_wait(&vm->cond, &vm->lock);
	}
	status = vm->exit_status;
	pthread_mutex_unlock(&vm->lock);
	/* Threads still blocked in a host call are left to the process's exit. */
	for (int i = 0; i < vm->n_vcpus; i++)
		if (vm->vcpus[i]->joinable && vm->vcpus[i]->state == VCPU_DONE) {
			pthread_join(vm->vcpus[i]->thread, NULL);
			vm->vcpus[i]->joinable = false;
		}
	return status;
}

int vm_run(struct vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	for (int i = 0; i < vm->n_vcpus; i++) {
		if (vm_thread_start(vm, vm->vcpus[i])) {
			log_err("cannot start the thread of vCPU %d", i);
			pthread_mutex_unlock(&vm->lock);
			vm_stop(vm, 1);
			pthread_mutex_lock(&vm->lock);
		}
	}
	pthread_mutex_unlock(&vm->lock);
	return vm_wait_stopped(vm);
}

/* @v's host thread started by the main thread (vm_serve_start), for a caller whose
 * seccomp filter a guest thread must not inherit. Caller holds vm->lock. */
static int vm_thread_start_by_main(struct vm *vm, struct vcpu *v)
{
	/* Taken while the lock is let go below: no clone may pick it meanwhile. */
	v->state = VCPU_GUEST;
	while (vm->start_req) /* another's request first */
		pthread_cond_wait(&vm->cond, &vm->lock);
	vm->start_req = v;
	pthread_cond_broadcast(&vm->cond);
	while (vm->start_req == v)
		pthread_cond_wait(&vm->cond, &vm->lock);
	return vm->start_rc;
}

/* Thread @cl on a vCPU of its own, starting with registers @regs (as it resumes), the
 * FPU and vector state of @fpu_of (NULL: what the vCPU holds; and its host thread
 * started by the main thread: the caller is not a vCPU). 0 or -errno. */
static int vm_thread_begin(struct vm *vm, const struct lx_clone *cl, const struct cpu_regs *regs,
			   struct kvm_cpu *fpu_of)
{
	struct vcpu *v = NULL;
	int rc;

	pthread_mutex_lock(&vm->lock);
	rc = vm->stop_req ? -EAGAIN : vm_thread_vcpu(vm, &v);
	if (!rc) {
		v->cr3 = vm_space_of(vm, cl->thread.proc)->cr3;
		rc = kvm_cpu_start_thread(v->cpu, regs,
					  &(struct cpu_entry){ .fs_base = cl->fs_base,
							       .gs_base = cl->gs_base, .cr3 = v->cr3 },
					  fpu_of);
	}
	if (!rc) {
		v->thread_state = cl->thread;
		v->thread_state.vcpu = v;
		rc = fpu_of ? vm_thread_start(vm, v) : vm_thread_start_by_main(vm, v);
	}
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
	if (rc && rc != -EAGAIN)
		log_warn("cannot start a vCPU for a new guest thread: %s", strerror(-rc));
	return rc;
}

int vm_thread_create(void *parent_vcpu, const struct lx_clone *cl)
{
	struct vcpu *parent = parent_vcpu;
	struct cpu_regs regs = cl->regs;

	x86_sysret_regs(&regs);
	return vm_thread_begin(parent->vm, cl, &regs, parent->cpu);
}

int vm_process_create(void *parent_vcpu, const struct lx_clone *cl, struct lx_proc *child)
{
	struct vcpu *parent = parent_vcpu;

	child->vm_space = parent->lx->proc->vm_space; /* vfork: the parent's memory */
	return vm_thread_create(parent_vcpu, cl);
}

/* A space ends: its readers get its blocks and leave its window (aspace_destroy
 * flushes them), and its memory slot goes before the window may serve another space
 * (vm_window_off, called by aspace_destroy with the lock held). */
static void vm_space_end(struct aspace *as)
{
	uint64_t flush = 0;

	aspace_destroy(as, &flush); /* frees @as */
}

/* New space @as becomes process @p's memory: its window a memory slot, p->mem its
 * view. On failure the space ends. */
static int vm_space_give(struct vm *vm, struct aspace *as, struct lx_proc *p)
{
	int rc = vm_window_slot(vm, as->win, true);

	if (rc) {
		log_warn("cannot give a process memory of its own: %s", strerror(-rc));
		vm_space_end(as);
		return rc;
	}
	p->mem = aspace_view(as);
	p->vm_space = as;
	return 0;
}

int vm_process_space(void *vcpu_arg, struct lx_proc *p)
{
	struct vcpu *vcpu = vcpu_arg;
	struct aspace *as;
	/* Lazy, as a fork's: only the first process is charged its whole RAM. */
	int rc = aspace_create_lazy(&vcpu->vm->spaces, &as);

	return rc ? rc : vm_space_give(vcpu->vm, as, p);
}

/* The 2 MiB blocks a fork shares: those the parent's mappings touch (the child's
 * copy of them), in the first half of the bits. The others are the child's own from
 * the start, zero. In the second half, those holding a shared mapping, which the
 * child gets a copy of at once (vmm/linux/shm.c). */
static uint64_t *vm_fork_blocks(const struct vm *vm, const struct lx_proc *child)
{
	uint32_t n = vm->spaces.blocks, words = (n + 63) / 64;
	uint64_t *bits = calloc(2 * (size_t)words, sizeof(*bits));

	if (bits) {
		vma_map_blocks(&child->mm.map, HUGE_SIZE, bits, n);
		vma_map_blocks_of(&child->mm.map, VMA_SHM, HUGE_SIZE, bits + words, n);
	}
	return bits;
}

int vm_process_fork(void *parent_vcpu, const struct lx_clone *cl, struct lx_proc *child)
{
	struct vcpu *parent = parent_vcpu;
	struct vm *vm = parent->vm;
	uint64_t *used = vm_fork_blocks(vm, child), flush = 0;
	struct aspace *as = NULL;
	int rc = used ? 0 : -ENOMEM;

	/* The parent's blocks turn read-only for all its vCPUs before the call returns
	 * (aspace_fork flushes them), so no write of its reaches the child after it. */
	if (!rc)
		rc = aspace_fork_copy(vm_space_of(vm, parent->lx->proc), used,
				      used + (vm->spaces.blocks + 63) / 64, &as, &flush);
	free(used);
	if (!rc)
		rc = vm_space_give(vm, as, child);
	if (rc)
		return rc;
	rc = lx_fork_memory(child, cl);
	if (!rc)
		rc = vm_thread_create(parent_vcpu, cl);
	if (rc) {
		child->mem = parent->lx->proc->mem; /* for what lx_proc_destroy releases */
		child->vm_space = NULL;
		vm_space_end(as);
	}
	return rc;
}

int vm_process_reset(void *vcpu_arg, struct lx_proc *p)
{
	struct vcpu *vcpu = vcpu_arg;
	struct aspace *as = vm_space_of(vcpu->vm, p);
	uint64_t flush = 0;

	/* Window 0 is what a snapshot in progress saves: its memory goes the way that
	 * lets the snapshot keep what it still owes the image (lx_mm_discard's
	 * before_discard), shared blocks copied first. */
	if (as == vcpu->vm->as0)
		return 0;
	return aspace_reset(as, &flush);
}

/* A process other than the first ended with its last thread: its parent learns of
 * it (or, for one started from outside, whoever started it), and its window, if it
 * had one, is given back. */
static void vm_process_end(struct vm *vm, struct lx_proc *p)
{
	struct aspace *own = p->vm_space && !p->vfork_parent ? p->vm_space : NULL;
	int wstatus = p->term_sig ? p->term_sig : (p->exit_status & 0xff) << 8;

	if (p->spawned && vm->spawn_ended)
		vm->spawn_ended(vm->spawn_ctx, p->pid, wstatus);
	lx_proc_ended(p, wstatus); /* @p may be gone from here on */
	if (own)
		vm_space_end(own);
}

void vm_process_exit(struct vcpu *vcpu)
{
	struct vm *vm = vcpu->vm;
	struct lx_proc *p = vcpu->lx->proc;

	pthread_mutex_lock(&vm->lock);
	for (int i = 0; i < vm->n_vcpus; i++) {
		struct vcpu *v = vm->vcpus[i];

		if (v != vcpu && v->state != VCPU_DONE && v->lx->proc == p) {
			__atomic_store_n(&v->quit, true, __ATOMIC_RELEASE);
			vcpu_kick(v);
		}
	}
	pthread_mutex_unlock(&vm->lock);
	vm_thread_exit(vcpu);
}

void vm_thread_exit(struct vcpu *vcpu)
{
	struct vm *vm = vcpu->vm;
	struct lx_proc *p = vcpu->lx->proc;
	bool last;

	pthread_mutex_lock(&vm->lock);
	vm->n_threads--;
	last = --p->vm_threads == 0;
	pthread_mutex_unlock(&vm->lock);
	if (!last)
		return;
	if (p == vm->proc)
		vm_stop(vm, vm->proc->exit_status); /* the VM ends with its first process */
	else
		vm_process_end(vm, p);
}

/* ---- processes started from outside (ccvm-oci exec) ---- */

/* The spawn may begin: the VM runs and no pause is under way (one that begins later
 * waits for the spawn, as it waits for a vCPU in the monitor). -ESRCH once stopped. */
static int vm_spawn_enter(struct vm *vm)
{
	int rc = 0;

	pthread_mutex_lock(&vm->lock);
	while (vm->pause_req && !vm->stop_req)
		pthread_cond_wait(&vm->cond, &vm->lock);
	if (vm->stop_req || !vm->proc)
		rc = -ESRCH;
	else if (!vm->n_threads) /* vm_run has not started the first thread yet */
		rc = -EAGAIN;
	else
		vm->n_spawning++;
	pthread_mutex_unlock(&vm->lock);
	return rc;
}

static void vm_spawn_leave(struct vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	vm->n_spawning--;
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
}

/* @p's program loaded into an address space of its own, and its first thread started
 * at the program's entry. On failure @p is as lx_spawn_new left it. */
static int vm_spawn_run(struct vm *vm, struct lx_proc *p, const struct vm_spawn *s)
{
	/* No exitless socket path for the program itself: its setup is a vCPU's to make
	 * (the control thread's filter has none of it); what it execs gets the path. */
	struct lx_config cfg = { .program = s->argv[0], .argc = s->argc, .argv = s->argv,
				 .envp = s->envp, .hooks = p->hooks, .fastio = false,
				 .quiet = true };
	struct lx_clone cl = { .fs_base = 0 };
	struct gmem *init_mem = p->mem;
	struct lx_entry entry;
	struct aspace *as;
	int rc = aspace_create_lazy(&vm->spaces, &as);

	if (!rc)
		rc = vm_space_give(vm, as, p);
	if (rc)
		return rc;
	rc = lx_spawn_load(p, &cfg, &entry);
	if (!rc) {
		lx_thread_init(p, &cl.thread, NULL);
		cl.regs.rip = entry.rip;
		cl.regs.rsp = entry.rsp;
		cl.regs.rflags = x86_user_rflags(0);
		rc = vm_thread_begin(vm, &cl, &cl.regs, NULL);
	}
	if (rc) {
		p->mem = init_mem; /* for what lx_proc_destroy releases */
		p->vm_space = NULL;
		vm_space_end(as);
	}
	return rc;
}

int vm_spawn(struct vm *vm, const struct vm_spawn *s, int *pid)
{
	struct lx_proc *p = NULL;
	int rc = s->argc > 0 ? vm_spawn_enter(vm) : -EINVAL;

	if (rc)
		return rc;
	rc = lx_spawn_new(vm->proc, s->cwd, s->fds, &p);
	if (rc == -ENOENT)
		rc = -ENOTDIR; /* the working directory's: no program was looked for yet */
	if (!rc) {
		*pid = p->pid; /* read before it runs: it may end at once */
		rc = vm_spawn_run(vm, p, s);
		if (rc)
			lx_proc_destroy(p);
	}
	vm_spawn_leave(vm);
	return rc;
}

int vm_spawn_signal(struct vm *vm, int pid, int sig)
{
	siginfo_t info = { .si_signo = sig, .si_code = SI_USER };
	int rc;

	if (pid <= 0 || !vm->proc)
		return -ESRCH;
	rc = lx_tree_kill(vm->proc, pid, &info);
	return rc == 1 ? -EPERM : rc; /* the first process is the container, not an exec */
}
