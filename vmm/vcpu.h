/*
 * vcpu.h - one virtual CPU: CPL3 setup, its host thread and the exit loop.
 */
#ifndef CCVM_VCPU_H
#define CCVM_VCPU_H

#include "linux/lx.h"

#include <linux/kvm.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct vm;

enum vcpu_state {
	VCPU_GUEST,   /* in KVM_RUN or about to enter it */
	VCPU_MONITOR, /* handling an exit */
	VCPU_BLOCKED, /* inside a blocking host call for the guest (read, nanosleep...) */
	VCPU_PARKED,  /* waiting for a pause to end */
	VCPU_DONE,
};

struct vcpu {
	struct vm *vm;
	int id;
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	enum vcpu_state state; /* guarded by vm->lock */
	bool in_syscall;       /* between a syscall exit and its return (for snapshots) */
	bool joinable;         /* its host thread was started and not yet joined */
	struct lx_thread *lx;  /* the guest thread this vCPU runs (&thread_state) */
	struct lx_thread thread_state;
};

/* Initial user-mode register state of a new vCPU. */
struct vcpu_entry {
	uint64_t rip, rsp;
	uint64_t fs_base, gs_base;
};

int vcpu_create(struct vm *vm, int id, const struct vcpu_entry *entry, struct vcpu **out);
void vcpu_destroy(struct vcpu *vcpu);

/* Give a vCPU (new, or one whose thread finished) a new guest thread's user state:
 * @regs as they are at the instant the thread's clone returns to it, segment bases
 * from @entry, and the FPU/SSE/AVX state @xsave. */
int vcpu_set_user(struct vcpu *vcpu, const struct kvm_regs *regs, const struct vcpu_entry *entry,
		  const struct kvm_xsave *xsave);

/* The registers of a thread at the return from the system call it is in, as SYSRET
 * leaves them (rip from rcx, rflags from r11). */
void vcpu_sysret_regs(struct kvm_regs *regs);

/* Body of a vCPU thread: runs the guest until the VM stops. */
void *vcpu_thread(void *arg);

/* Kick a vCPU out of KVM_RUN (from another thread). */
void vcpu_kick(struct vcpu *vcpu);

/* The personality's signal hooks (lx.h) for a vCPU: a kick out of KVM_RUN or a host
 * call for a signal, and its FPU state in XSAVE form for a signal frame. */
void vcpu_signal_kick(void *vcpu);
int vcpu_fpu_save(void *vcpu, void *buf, size_t cap, uint64_t *xfeatures);
int vcpu_fpu_load(void *vcpu, const void *buf, size_t len);

/* Around a host call that may block on behalf of the guest: lets a pause proceed
 * without waiting for it. A call that completes during a pause waits in
 * vcpu_block_end until the pause is over before its result reaches the registers (a
 * snapshot records it as not yet made). */
void vcpu_block_begin(struct vcpu *vcpu);
void vcpu_block_end(struct vcpu *vcpu);

/* The guest TSC minus the host TSC (constant for the VM's life). */
int vcpu_tsc_offset(struct vcpu *vcpu, int64_t *offset);

#endif

/* The architectural state of one vCPU as a snapshot records it. */
struct vcpu_saved {
	uint32_t magic;
	uint32_t size;            /* sizeof(struct vcpu_saved): refuses a foreign layout */
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_xsave xsave;
	struct kvm_xcrs xcrs;
	struct kvm_vcpu_events events;
	uint32_t n_msrs;
	uint32_t pad;
	struct kvm_msr_entry msrs[8];
};

#define VCPU_STATE_MAGIC 0x76637075 /* "vcpu" */

/* Capture the state of a vCPU that is parked or blocked in a system call (a blocked
 * call is recorded as not yet made: restored, the guest makes it again). */
int vcpu_save_state(struct vcpu *vcpu, struct vcpu_saved *st);

/* The MSRs ccvm sets on every vCPU, with their values; the ones a snapshot saves. */
#define VCPU_FIXED_MSRS 4
extern const struct kvm_msr_entry vcpu_fixed_msrs[VCPU_FIXED_MSRS];

/* Check a saved state field by field against what ccvm itself can save (vcpu_state.c):
 * 0, or -EINVAL with the field and why in @err. Needs no KVM. */
int vcpu_saved_check(const struct vcpu_saved *st, char *err, size_t errlen);

/* Load a captured state into a freshly created vCPU. */
int vcpu_load_state(struct vcpu *vcpu, const struct vcpu_saved *st);
