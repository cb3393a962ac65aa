/*
 * kvm_state.c - a vCPU's architectural state saved for a snapshot and loaded on
 * restore.
 *
 * The record (struct kvm_saved) holds the general and segment registers, the XSAVE
 * area, XCR0, pending events and the MSRs a CPL3 guest depends on beyond its segments.
 * Loading takes the record's user state, never its privileged state as such: RFLAGS
 * as any return to CPL3 has them, and the vCPU's own task register whatever the image
 * names (kvm_check.c refuses the rest).
 */
#include "kvm_impl.h"
#include "../../mmu/layout.h"

#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>

#define SYSCALL_INSN_LEN 2

struct kvm_msr_block {
	struct kvm_msrs hdr;
	struct kvm_msr_entry e[8];
};

size_t kvm_saved_size(void)
{
	return sizeof(struct kvm_saved);
}

struct kvm_saved *kvm_saved_nth(void *array, size_t i)
{
	return (struct kvm_saved *)((uint8_t *)array + i * sizeof(struct kvm_saved));
}

/* The general and segment registers: those in the sync area when they are the
 * thread's (edited since the exit and not yet loaded, or a system call under way),
 * else KVM's. A thread blocked in a system call is recorded at the moment before its
 * `syscall` instruction, so the restored guest makes the call again. */
static int kvm_save_regs(struct kvm_cpu *c, bool in_syscall, struct kvm_saved *st)
{
	struct kvm_run *run = c->run;

	if (run->kvm_dirty_regs & KVM_SYNC_X86_REGS || in_syscall)
		st->regs = run->s.regs.regs;
	else if (ioctl(c->fd, KVM_GET_REGS, &st->regs) < 0)
		return -errno;
	if (run->kvm_dirty_regs & KVM_SYNC_X86_SREGS || in_syscall)
		st->sregs = run->s.regs.sregs;
	else if (ioctl(c->fd, KVM_GET_SREGS, &st->sregs) < 0)
		return -errno;
	if (in_syscall) {
		struct cpu_regs r;

		kvm_regs_to(&r, &st->regs);
		x86_sysret_regs(&r);
		r.rip -= SYSCALL_INSN_LEN;
		kvm_regs_from(&st->regs, &r);
		kvm_seg_user_code(&st->sregs.cs);
		kvm_seg_user_data(&st->sregs.ss, 0);
	}
	return 0;
}

int kvm_cpu_save(struct kvm_cpu *c, bool in_syscall, struct kvm_saved *st)
{
	struct kvm_msr_block m = { .hdr.nmsrs = KVM_FIXED_MSRS };
	int rc;

	memset(st, 0, sizeof(*st));
	st->magic = KVM_SAVED_MAGIC;
	st->size = sizeof(*st);
	rc = kvm_save_regs(c, in_syscall, st);
	if (rc)
		return rc;
	/* The page tables are ccvm's and a restore writes them afresh, first at
	 * LAYOUT_PGTABLE (kvm_saved_check wants no other): the CR3 a process runs on now
	 * moves with every change of its tables (a fork's, mmu/aspace.c). */
	st->sregs.cr3 = LAYOUT_PGTABLE;
	if (ioctl(c->fd, KVM_GET_XSAVE, &st->xsave) < 0 ||
	    ioctl(c->fd, KVM_GET_XCRS, &st->xcrs) < 0 ||
	    ioctl(c->fd, KVM_GET_VCPU_EVENTS, &st->events) < 0)
		return -errno;
	for (unsigned i = 0; i < KVM_FIXED_MSRS; i++)
		m.e[i].index = kvm_fixed_msrs[i].index;
	if (ioctl(c->fd, KVM_GET_MSRS, &m) != KVM_FIXED_MSRS)
		return -EIO;
	st->n_msrs = KVM_FIXED_MSRS;
	memcpy(st->msrs, m.e, sizeof(m.e[0]) * KVM_FIXED_MSRS);
	return 0;
}

int kvm_cpu_load(struct kvm_cpu *c, const struct kvm_saved *st)
{
	struct kvm_msr_block m = { .hdr.nmsrs = st->n_msrs };
	struct kvm_regs regs = st->regs;
	struct kvm_sregs sregs = st->sregs;

	if (st->magic != KVM_SAVED_MAGIC || st->size != sizeof(*st) || st->n_msrs > 8)
		return -EINVAL;
	memcpy(m.e, st->msrs, sizeof(m.e[0]) * st->n_msrs);
	/* A return to CPL3 like any other, whatever kvm_saved_check let through. */
	regs.rflags = x86_user_rflags(regs.rflags);
	/* This vCPU's own TSS and exception stack, whichever the image names. */
	kvm_own_tr(c->id, &sregs.tr);
	if (ioctl(c->fd, KVM_SET_SREGS, &sregs) < 0 || ioctl(c->fd, KVM_SET_REGS, &regs) < 0 ||
	    ioctl(c->fd, KVM_SET_XCRS, &st->xcrs) < 0 ||
	    ioctl(c->fd, KVM_SET_XSAVE, &st->xsave) < 0 ||
	    ioctl(c->fd, KVM_SET_VCPU_EVENTS, &st->events) < 0)
		return -errno;
	if (ioctl(c->fd, KVM_SET_MSRS, &m) != (int)st->n_msrs)
		return -EIO;
	c->run->kvm_dirty_regs = 0;
	c->fresh = false;
	return 0;
}
