/*
 * kvm_impl.h - the platform's own definitions, shared by the files of vmm/kvm/ and the unit
 * tests that build saved states: the KVM objects behind struct kvm_vm and struct
 * kvm_cpu, and the layout of a saved vCPU state. Nothing outside vmm/kvm/ and tests/
 * includes it (it brings linux/kvm.h).
 */
#ifndef CCVM_KVM_IMPL_H
#define CCVM_KVM_IMPL_H

#include "kvm.h"

#include <linux/kvm.h>

struct kvm_vm {
	int kvm_fd;                /* /dev/kvm */
	int fd;                    /* the VM */
	int run_size;              /* size of each vCPU's kvm_run mapping */
	uint8_t *ram;              /* host mapping of guest-physical 0.. */
	uint64_t size;
	uint64_t xcr0;             /* state components enabled for the guest */
	struct kvm_cpuid2 *cpuid;  /* what KVM_SET_CPUID2 gives each vCPU */
};

struct kvm_cpu {
	struct kvm_vm *vm;
	int id;
	int fd;
	struct kvm_run *run;
	/* The sync area holds where the thread is: true after an exit, false after a kick
	 * or a state loaded with ioctls (then kvm_cpu_get reads it back). */
	bool fresh;
};

/* The record of one vCPU in an image's vcpus section. Its layout is the format. */
struct kvm_saved {
	uint32_t magic;
	uint32_t size;            /* sizeof(struct kvm_saved): refuses a foreign layout */
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_xsave xsave;
	struct kvm_xcrs xcrs;
	struct kvm_vcpu_events events;
	uint32_t n_msrs;
	uint32_t pad;
	struct kvm_msr_entry msrs[8];
};

#define KVM_SAVED_MAGIC 0x76637075 /* "vcpu" */

/* The MSRs ccvm sets on every vCPU, with their values; the ones a snapshot saves. */
#define KVM_FIXED_MSRS 4
extern const struct kvm_msr_entry kvm_fixed_msrs[KVM_FIXED_MSRS];

/* ccvm's user code and data segments, and vCPU @id's own task register. */
void kvm_seg_user_code(struct kvm_segment *s);
void kvm_seg_user_data(struct kvm_segment *s, uint64_t base);
void kvm_own_tr(int id, struct kvm_segment *tr);

/* Between ccvm's registers and KVM's (the same fields, in the same order). */
void kvm_regs_from(struct kvm_regs *k, const struct cpu_regs *r);
void kvm_regs_to(struct cpu_regs *r, const struct kvm_regs *k);

#endif
