/*
 * vm.c - create a VM for a CPL3 guest and drive its lifecycle.
 *
 * The platform (vmm/kvm/) maps all guest RAM at guest-physical 0. The system area at its start
 * gets the CPU tables and page tables once; nothing in them changes afterwards. The
 * vCPUs run on their own threads; the main thread waits for the VM to stop, and the
 * control thread may pause and resume it. Pausing means: no vCPU is executing guest
 * code (each is parked between exits, or blocked in a host call for the guest).
 */
#include "vm.h"
#include "vcpu.h"
#include "../base/log.h"
#include "kvm/kvm.h"
#include "../mmu/cpu_tables.h"
#include "../mmu/layout.h"
#include "../mmu/tracker.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(VM_MAX_VCPUS <= LAYOUT_MAX_VCPUS, "a TSS and an exception stack for every vCPU");

/* Windows of guest memory, so processes at most (docs/processes.md). */
#define VM_WINDOWS GMEM_MAX_WINDOWS

int vm_window_slot(struct vm *vm, int win, bool on)
{
	uint64_t base = (uint64_t)win * vm->spaces.window;

	return kvm_vm_window(vm->kvm, win, base, on ? vm->mem.host + base : NULL,
			     on ? vm->spaces.window : 0);
}

/* The address spaces' window_off callback: window @win's slot goes. */
void vm_window_off(void *ctx, int win)
{
	vm_window_slot(ctx, win, false);
}

int vm_system_area(struct vm *vm)
{
	int rc = 0;

	if (!vm->as0)
		rc = aspace_create(&vm->spaces, &vm->as0);
	else
		aspace_tables(vm->as0);
	if (rc)
		return rc;
	/* The platform starts every vCPU there (vmm/kvm/kvm_cpu.c): the first space's
	 * tables, written first in a fresh pool. */
	if (vm->as0->cr3 != LAYOUT_PGTABLE)
		return -EINVAL;
	cpu_tables_build(vm->ram.host);
	return 0;
}

struct gmem *vm_first_view(struct vm *vm)
{
	return aspace_view(vm->as0);
}

/*
 * The vCPUs of the spaces in @mask off their old page tables (aspace.h's flush): each
 * one running over tables of such a space is kicked, and waited for until that run
 * ended; it loads the new CR3 before its next one (vcpu_enter). Lock-free on both
 * sides, so a change may call it holding any lock: a run ends without the monitor's.
 */
static void vm_flush(void *ctx, uint64_t mask)
{
	struct vm *vm = ctx;
	int n = __atomic_load_n(&vm->n_vcpus, __ATOMIC_ACQUIRE);

	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* the new CR3s before in_run is read */
	for (int i = 0; i < n; i++) {
		struct vcpu *v = vm->vcpus[i];
		uint64_t runs = __atomic_load_n(&v->runs, __ATOMIC_SEQ_CST);

		if (!__atomic_load_n(&v->in_run, __ATOMIC_SEQ_CST) ||
		    !(mask >> __atomic_load_n(&v->win, __ATOMIC_SEQ_CST) & 1))
			continue;
		vcpu_kick(v);
		while (__atomic_load_n(&v->in_run, __ATOMIC_SEQ_CST) &&
		       __atomic_load_n(&v->runs, __ATOMIC_SEQ_CST) == runs)
			sched_yield();
		stats_count(&vm->stats.flushes);
	}
}

/* The spaces moved to fresh table pages and no vCPU uses the old ones: KVM forgets
 * what it built from them (kvm_vm_forget), so that they may be written again. */
static void vm_recycle(void *ctx)
{
	struct vm *vm = ctx;
	int rc = kvm_vm_forget(vm->kvm);

	stats_count(&vm->stats.recycles);
	if (rc)
		log_err("cannot make KVM forget old page tables (%s): processes may see stale "
			"memory", strerror(-rc));
}

int vm_create(struct vm *vm, uint64_t mem_bytes, uint64_t mem_total)
{
	int rc;

	memset(vm, 0, sizeof(*vm));
	vm->max_vcpus = VM_DEFAULT_VCPUS;
	pthread_mutex_init(&vm->lock, NULL);
	pthread_cond_init(&vm->cond, NULL);
	rc = gmem_map_windows(&vm->mem, mem_bytes, VM_WINDOWS);
	if (rc) {
		log_err("cannot reserve %llu MiB of guest RAM: %s", (unsigned long long)(mem_bytes >> 20),
			strerror(-rc));
		goto err;
	}
	gmem_view(&vm->ram, &vm->mem, 0, mem_bytes, NULL);
	rc = aspace_set_init(&vm->spaces, &vm->mem, mem_bytes, VM_WINDOWS);
	vm->mem_total = mem_total ? mem_total : VM_MEM_TOTAL_TIMES * mem_bytes;
	if (vm->mem_total < mem_bytes) {
		log_err("--mem-total %llu MiB: less than the VM's RAM, %llu MiB (the first "
			"process holds all of it)", (unsigned long long)(vm->mem_total >> 20),
			(unsigned long long)(mem_bytes >> 20));
		rc = -EINVAL;
	}
	if (!rc) /* a budget above every window's memory bounds nothing */
		aspace_set_budget(&vm->spaces, vm->mem_total / HUGE_SIZE < ASPACE_NO_BUDGET ?
						       (uint32_t)(vm->mem_total / HUGE_SIZE) :
						       ASPACE_NO_BUDGET);
	vm->spaces.flush = vm_flush;
	vm->spaces.flush_ctx = vm;
	vm->spaces.recycle = vm_recycle;
	vm->spaces.recycle_ctx = vm;
	vm->spaces.window_off = vm_window_off;
	vm->spaces.window_off_ctx = vm;
	if (!rc)
		rc = kvm_vm_create(vm->ram.host, vm->ram.size, &vm->kvm);
	if (!rc)
		rc = vm_system_area(vm);
	if (rc)
		goto err;
	return 0;
err:
	vm_destroy(vm);
	return rc;
}

int vm_tree(struct vm *vm)
{
	int rc = lx_tree_init(&vm->tree, vm->proc, vm->max_procs ? vm->max_procs : LX_MAX_PROCS);

	if (rc)
		log_err("cannot start the process tree: %s", strerror(-rc));
	return rc;
}

void vm_destroy(struct vm *vm)
{
	if (vm->tree.max)
		lx_tree_fini(&vm->tree);
	for (int i = 0; i < vm->n_vcpus; i++)
		vcpu_destroy(vm->vcpus[i]);
	vm->n_vcpus = 0;
	kvm_vm_destroy(vm->kvm);
	vm->kvm = NULL;
	aspace_set_fini(&vm->spaces);
	vm->as0 = NULL;
	gmem_unmap(&vm->mem);
}

/* (vm.h) */
bool vm_all_quiet(struct vm *vm, bool allow_parked)
{
	if (vm->n_spawning) /* a process being started from outside: as a vCPU in the monitor */
		return false;
	for (int i = 0; i < vm->n_vcpus; i++) {
		enum vcpu_state st = __atomic_load_n(&vm->vcpus[i]->state, __ATOMIC_ACQUIRE);

		if (st == VCPU_GUEST || st == VCPU_MONITOR)
			return false;
		if (st == VCPU_PARKED && !allow_parked)
			return false;
	}
	return true;
}

bool vm_all_done(struct vm *vm)
{
	bool done = true;

	pthread_mutex_lock(&vm->lock);
	for (int i = 0; i < vm->n_vcpus; i++)
		done = done && vm->vcpus[i]->state == VCPU_DONE;
	pthread_mutex_unlock(&vm->lock);
	return done;
}

/* Kick every vCPU whose host thread runs (a finished one's thread may be gone). */
static void vm_kick_all(struct vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	for (int i = 0; i < vm->n_vcpus; i++)
		if (vm->vcpus[i]->joinable && vm->vcpus[i]->state != VCPU_DONE)
			vcpu_kick(vm->vcpus[i]);
	pthread_mutex_unlock(&vm->lock);
}

void vm_stop(struct vm *vm, int status)
{
	pthread_mutex_lock(&vm->lock);
	if (!vm->stop_req) {
		vm->stop_req = true;
		vm->exit_status = status;
		vm->state = VM_STOPPED;
	}
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
	vm_kick_all(vm);
}

int vm_pause(struct vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	if (vm->stop_req) {
		pthread_mutex_unlock(&vm->lock);
		return -ESRCH;
	}
	vm->pause_req = true;
	vm->pause_count++;
	pthread_mutex_unlock(&vm->lock);
	vm_kick_all(vm);
	pthread_mutex_lock(&vm->lock);
	while (!vm->stop_req && !vm_all_quiet(vm, true))
		pthread_cond_wait(&vm->cond, &vm->lock);
	if (!vm->stop_req)
		vm->state = VM_PAUSED;
	pthread_mutex_unlock(&vm->lock);
	return 0;
}

int vm_resume(struct vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	if (vm->stop_req) {
		pthread_mutex_unlock(&vm->lock);
		return -ESRCH;
	}
	if (vm->pause_count > 0 && --vm->pause_count == 0) {
		vm->pause_req = false;
		vm->state = VM_RUNNING;
	}
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
	return 0;
}

enum vm_state vm_get_state(struct vm *vm)
{
	enum vm_state st;

	pthread_mutex_lock(&vm->lock);
	st = vm->state;
	pthread_mutex_unlock(&vm->lock);
	return st;
}

uint64_t vm_host_rss(void)
{
	unsigned long long size = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &size, &rss) != 2)
		rss = 0;
	fclose(f);
	return rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

/*
 * The dirty log of guest RAM that a VM's coverage tracker reads (mmu/tracker.c), from
 * the platform (kvm_dirty_*).
 */
static int vm_log_logging(void *ctx, bool on)
{
	return kvm_dirty_logging(((struct vm *)ctx)->kvm, on);
}

static int vm_log_watch(void *ctx, uint64_t *pages)
{
	return kvm_dirty_clear(((struct vm *)ctx)->kvm, pages);
}

static int vm_log_get(void *ctx, uint64_t *bitmap)
{
	return kvm_dirty_get(((struct vm *)ctx)->kvm, bitmap);
}

static const struct tracker_log_ops vm_log_ops = {
	.logging = vm_log_logging, .watch = vm_log_watch, .get = vm_log_get,
};

int vm_dirty_log(struct vm *vm, struct tracker_log *log)
{
	int rc = kvm_dirty_manual(vm->kvm);

	if (rc)
		return rc;
	*log = (struct tracker_log){ .ops = &vm_log_ops, .ctx = vm };
	return 0;
}
