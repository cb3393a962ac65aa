/*
 * vm.c - create a KVM VM for a CPL3 guest and drive its lifecycle.
 *
 * One memslot covers all guest RAM at guest-physical 0. The system area at its start
 * gets the CPU tables and page tables once; nothing in them changes afterwards. The
 * vCPUs run on their own threads; the main thread waits for the VM to stop, and the
 * control thread may pause and resume it. Pausing means: no vCPU is executing guest
 * code (each is parked between exits, or blocked in a host call for the guest).
 */
#include "vm.h"
#include "../mmu/tracker.h"
#include "cpu_tables.h"
#include "log.h"
#include "vcpu.h"
#include "x86.h"
#include "../mmu/layout.h"
#include "../mmu/pagetable.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define KVM_API_VERSION_EXPECTED 12
#define CPUID_MAX_ENTRIES 256
#define CPUID_LEAF_XSAVE 0xD
/* State components the guest may enable: x87, SSE, AVX and the three AVX-512 ones.
 * Not AMX (needs per-process permission) nor PKRU (needs CR4.PKE). */
#define XCR0_GUEST_MASK                                                                \
	(XCR0_X87 | XCR0_SSE | XCR0_AVX | XCR0_OPMASK | XCR0_ZMM_HI256 | XCR0_HI16_ZMM)
#define XCR0_AVX512 (XCR0_OPMASK | XCR0_ZMM_HI256 | XCR0_HI16_ZMM)

static int vm_check_caps(struct vm *vm)
{
	int sync = ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_SYNC_REGS);

	if ((sync & (KVM_SYNC_X86_REGS | KVM_SYNC_X86_SREGS)) !=
	    (KVM_SYNC_X86_REGS | KVM_SYNC_X86_SREGS)) {
		log_err("this KVM lacks KVM_CAP_SYNC_REGS, which ccvm needs to return from "
			"system calls without extra ioctls");
		return -ENOTSUP;
	}
	if (ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_IMMEDIATE_EXIT) <= 0) {
		log_err("this KVM lacks KVM_CAP_IMMEDIATE_EXIT");
		return -ENOTSUP;
	}
	return 0;
}

static int vm_get_cpuid(struct vm *vm)
{
	struct kvm_cpuid2 *c;

	c = calloc(1, sizeof(*c) + CPUID_MAX_ENTRIES * sizeof(struct kvm_cpuid_entry2));
	if (!c)
		return -ENOMEM;
	c->nent = CPUID_MAX_ENTRIES;
	if (ioctl(vm->kvm_fd, KVM_GET_SUPPORTED_CPUID, c) < 0) {
		int rc = -errno;

		log_err("KVM_GET_SUPPORTED_CPUID: %s", strerror(errno));
		free(c);
		return rc;
	}
	vm->cpuid = c;
	vm->xcr0 = XCR0_X87 | XCR0_SSE;
	for (unsigned i = 0; i < c->nent; i++) {
		struct kvm_cpuid_entry2 *e = &c->entries[i];

		if (e->function == CPUID_LEAF_XSAVE && e->index == 0)
			vm->xcr0 = ((uint64_t)e->edx << 32 | e->eax) & XCR0_GUEST_MASK;
	}
	/* AVX-512 state is all or nothing. */
	if ((vm->xcr0 & XCR0_AVX512) != XCR0_AVX512)
		vm->xcr0 &= ~XCR0_AVX512;
	return 0;
}

static int vm_open_kvm(struct vm *vm)
{
	vm->kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (vm->kvm_fd < 0) {
		int rc = -errno;

		log_err("cannot open /dev/kvm: %s (is KVM available, and may this user open it? "
			"try running as root)", strerror(errno));
		return rc;
	}
	if (ioctl(vm->kvm_fd, KVM_GET_API_VERSION, 0) != KVM_API_VERSION_EXPECTED) {
		log_err("unexpected KVM API version");
		return -ENOTSUP;
	}
	return vm_check_caps(vm);
}

static int vm_map_ram(struct vm *vm, uint64_t mem_bytes)
{
	struct kvm_userspace_memory_region region;
	int rc = gmem_map(&vm->mem, mem_bytes);

	if (rc) {
		log_err("cannot reserve %llu MiB of guest RAM: %s", (unsigned long long)(mem_bytes >> 20),
			strerror(-rc));
		return rc;
	}
	region = (struct kvm_userspace_memory_region){
		.slot = 0,
		.guest_phys_addr = 0,
		.memory_size = vm->mem.size,
		.userspace_addr = (uint64_t)(uintptr_t)vm->mem.host,
	};
	if (ioctl(vm->fd, KVM_SET_USER_MEMORY_REGION, &region) < 0) {
		rc = -errno;
		log_err("KVM_SET_USER_MEMORY_REGION (%llu MiB): %s", (unsigned long long)(mem_bytes >> 20),
			strerror(errno));
		return rc;
	}
	return vm_system_area(vm);
}

int vm_system_area(struct vm *vm)
{
	int rc = pt_build(vm->mem.host, vm->mem.size, &vm->cr3);

	if (rc)
		return rc;
	cpu_tables_build(vm->mem.host);
	return 0;
}

int vm_create(struct vm *vm, uint64_t mem_bytes)
{
	int rc;

	memset(vm, 0, sizeof(*vm));
	vm->kvm_fd = vm->fd = -1;
	vm->max_vcpus = VM_DEFAULT_VCPUS;
	pthread_mutex_init(&vm->lock, NULL);
	pthread_cond_init(&vm->cond, NULL);
	rc = vm_open_kvm(vm);
	if (rc)
		goto err;
	vm->fd = ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
	if (vm->fd < 0) {
		rc = -errno;
		log_err("KVM_CREATE_VM: %s", strerror(errno));
		goto err;
	}
	vm->run_size = ioctl(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (vm->run_size <= 0) {
		rc = -EIO;
		goto err;
	}
	rc = vm_get_cpuid(vm);
	if (rc)
		goto err;
	rc = vm_map_ram(vm, mem_bytes);
	if (rc)
		goto err;
	return 0;
err:
	vm_destroy(vm);
	return rc;
}

void vm_destroy(struct vm *vm)
{
	for (int i = 0; i < vm->n_vcpus; i++)
		vcpu_destroy(vm->vcpus[i]);
	vm->n_vcpus = 0;
	if (vm->fd >= 0)
		close(vm->fd);
	if (vm->kvm_fd >= 0)
		close(vm->kvm_fd);
	vm->fd = vm->kvm_fd = -1;
	gmem_unmap(&vm->mem);
	free(vm->cpuid);
	vm->cpuid = NULL;
}

/* Every vCPU is out of guest code for good, or blocked in a host call that will
 * never matter again (the process exits under it). Caller holds vm->lock. */
static bool vm_all_quiet(struct vm *vm, bool allow_parked)
{
	for (int i = 0; i < vm->n_vcpus; i++) {
		enum vcpu_state st = __atomic_load_n(&vm->vcpus[i]->state, __ATOMIC_ACQUIRE);

		if (st == VCPU_GUEST || st == VCPU_MONITOR)
			return false;
		if (st == VCPU_PARKED && !allow_parked)
			return false;
	}
	return true;
}

int vm_run(struct vm *vm)
{
	int status;

	pthread_mutex_lock(&vm->lock);
	for (int i = 0; i < vm->n_vcpus; i++) {
		if (vm_thread_start(vm, vm->vcpus[i])) {
			log_err("cannot start the thread of vCPU %d", i);
			pthread_mutex_unlock(&vm->lock);
			vm_stop(vm, 1);
			pthread_mutex_lock(&vm->lock);
		}
	}
	while (!vm->stop_req || !vm_all_quiet(vm, false))
		pthread_cond_wait(&vm->cond, &vm->lock);
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
 * KVM's dirty log of memslot 0 (the one RAM slot): the log a VM's coverage tracker
 * reads (mmu/tracker.c). Logging is switched per window by re-registering the slot
 * with KVM_MEM_LOG_DIRTY_PAGES; watching clears bits (manual protect), which
 * write-protects those pages until their next write.
 */
static int vm_log_logging(void *ctx, bool on)
{
	struct vm *vm = ctx;
	struct kvm_userspace_memory_region region = {
		.slot = 0, .flags = on ? KVM_MEM_LOG_DIRTY_PAGES : 0, .guest_phys_addr = 0,
		.memory_size = vm->mem.size, .userspace_addr = (uint64_t)(uintptr_t)vm->mem.host,
	};

	return ioctl(vm->fd, KVM_SET_USER_MEMORY_REGION, &region) < 0 ? -errno : 0;
}

static int vm_log_watch(void *ctx, uint64_t *pages)
{
	struct vm *vm = ctx;
	struct kvm_clear_dirty_log log = { .slot = 0, .first_page = 0,
					   .num_pages = (uint32_t)(vm->mem.size / PAGE_SIZE),
					   .dirty_bitmap = pages };

	return ioctl(vm->fd, KVM_CLEAR_DIRTY_LOG, &log) < 0 ? -errno : 0;
}

static int vm_log_get(void *ctx, uint64_t *bitmap)
{
	struct vm *vm = ctx;
	struct kvm_dirty_log log = { .slot = 0, .dirty_bitmap = bitmap };

	return ioctl(vm->fd, KVM_GET_DIRTY_LOG, &log) < 0 ? -errno : 0;
}

static const struct tracker_log_ops vm_log_ops = {
	.logging = vm_log_logging, .watch = vm_log_watch, .get = vm_log_get,
};

int vm_dirty_log(struct vm *vm, struct tracker_log *log)
{
	/* Manual protect: reading the log does not re-protect pages behind our back;
	 * initially set: turning logging on protects nothing until the sample is cleared. */
	struct kvm_enable_cap cap = { .cap = KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2,
				      .args[0] = KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE |
						 KVM_DIRTY_LOG_INITIALLY_SET };

	if (ioctl(vm->fd, KVM_ENABLE_CAP, &cap) < 0)
		return -errno;
	*log = (struct tracker_log){ .ops = &vm_log_ops, .ctx = vm };
	return 0;
}
