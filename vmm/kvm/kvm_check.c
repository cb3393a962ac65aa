/*
 * kvm_check.c - what a saved vCPU state (struct kvm_saved, in a snapshot image) may
 * hold, checked without KVM.
 *
 * An image is data, never policy: a file written by anyone must not start guest code
 * at CPL0, widen its I/O rights, point the CPU at tables or entry points of its own,
 * or carry an event ccvm never injects. So every field ccvm could not have written
 * itself is refused with its name: CS at DPL 0 except at the entry of ccvm's own trap
 * stubs (a vCPU interrupted right after a `syscall` or an exception, before the stub's
 * one `out`), a stub address at DPL 3 other than the syscall entry (kvm_pvm runs it at
 * CPL3), RFLAGS.IOPL or the virtual-8086 bits, descriptor tables, task register or page
 * tables other than ccvm's, MSRs outside the set ccvm saves or with other values, and
 * pending interrupts, NMIs, SMIs or triple faults. The user-mode registers and vector
 * state are the guest's own and pass.
 */
#include "kvm_impl.h"
#include "../../base/log.h"
#include "../../mmu/cpu_tables.h"
#include "../../mmu/layout.h"

#include <errno.h>
#include <stdio.h>

#define KVM_EXC_VECTORS 32 /* architectural exceptions: the vectors with a stub */
#define USER_TOP (1ULL << 47) /* canonical user addresses lie below */

/* The entry of trap stub @rip (the syscall stub or an exception's), or false. */
static bool kvm_stub_entry(uint64_t rip, bool *syscall)
{
	*syscall = rip == STUB_SYSCALL;
	if (*syscall)
		return true;
	for (unsigned v = 0; v < KVM_EXC_VECTORS; v++)
		if (rip == STUB_EXC(v))
			return true;
	return false;
}

static int kvm_check_cpl(const struct kvm_saved *st, char *err, size_t errlen)
{
	uint64_t rip = st->regs.rip;
	bool in_stubs = rip >= LAYOUT_STUB_AREA && rip < LAYOUT_USER_BASE, syscall = false;
	bool entry = kvm_stub_entry(rip, &syscall);

	if (st->sregs.cs.dpl == 0) {
		if (!entry || st->sregs.cs.selector != GDT_KERNEL_CS)
			return log_set_err(-EINVAL, err, errlen,
					   "cs.dpl 0 at rip %#llx (only ccvm's trap "
					   "stub entries run at CPL0)",
					   (unsigned long long)rip);
		return 0;
	}
	if (st->sregs.cs.dpl != 3 || st->sregs.cs.selector != GDT_USER_CS || !st->sregs.cs.l)
		return log_set_err(-EINVAL, err, errlen,
				   "cs (selector %#x, dpl %u): not ccvm's user code "
				   "segment",
				   st->sregs.cs.selector, st->sregs.cs.dpl);
	if (in_stubs && !syscall)
		return log_set_err(-EINVAL, err, errlen,
				   "rip %#llx: inside ccvm's trap stubs at CPL3",
				   (unsigned long long)rip);
	if (rip >= USER_TOP)
		return log_set_err(-EINVAL, err, errlen, "rip %#llx: not a user address",
				   (unsigned long long)rip);
	return 0;
}

static int kvm_check_flags(const struct kvm_saved *st, char *err, size_t errlen)
{
	uint64_t f = st->regs.rflags;

	/* At the syscall stub the program's flags are in R11: the return takes them. */
	if (st->regs.rip == STUB_SYSCALL && (st->regs.r11 & RFLAGS_IOPL))
		return log_set_err(-EINVAL, err, errlen,
				   "r11.iopl %llu at the syscall stub (ccvm runs guests at IOPL 0)",
				   (unsigned long long)((st->regs.r11 & RFLAGS_IOPL) >> 12));
	if (f & RFLAGS_IOPL)
		return log_set_err(-EINVAL, err, errlen,
				   "rflags.iopl %llu (ccvm runs guests at IOPL 0)",
				   (unsigned long long)((f & RFLAGS_IOPL) >> 12));
	if (f & (RFLAGS_VM | RFLAGS_VIF | RFLAGS_VIP))
		return log_set_err(-EINVAL, err, errlen,
				   "rflags %#llx: virtual-8086 or virtual interrupt "
				   "bits",
				   (unsigned long long)f);
	if ((f & ~RFLAGS_DEFINED) || !(f & RFLAGS_FIXED))
		return log_set_err(-EINVAL, err, errlen, "rflags %#llx: reserved bits",
				   (unsigned long long)f);
	return 0;
}

/* One of ccvm's TSSes, or the single one of images saved before each vCPU had its
 * own. Restore loads the vCPU's own in any case. */
static bool kvm_tr_is_ccvms(const struct kvm_segment *tr)
{
	if (tr->selector != GDT_TSS)
		return false;
	if (tr->base == LAYOUT_TSS && tr->limit == TSS_LIMIT_V1)
		return true;
	for (int id = 0; id < LAYOUT_MAX_VCPUS; id++)
		if (tr->base == cpu_tss_base(id) && tr->limit == cpu_tss_limit(id))
			return true;
	return false;
}

/* The tables and page tables are ccvm's, rebuilt in the system area on restore. */
static int kvm_check_tables(const struct kvm_saved *st, char *err, size_t errlen)
{
	const struct kvm_sregs *s = &st->sregs;

	if (s->gdt.base != LAYOUT_GDT || s->gdt.limit != GDT_LIMIT)
		return log_set_err(-EINVAL, err, errlen, "gdt %#llx+%u: not ccvm's",
				   (unsigned long long)s->gdt.base, s->gdt.limit);
	if (s->idt.base != LAYOUT_IDT || s->idt.limit != IDT_LIMIT)
		return log_set_err(-EINVAL, err, errlen, "idt %#llx+%u: not ccvm's",
				   (unsigned long long)s->idt.base, s->idt.limit);
	if (!kvm_tr_is_ccvms(&s->tr))
		return log_set_err(-EINVAL, err, errlen,
				   "tr %#x at %#llx: not ccvm's task state segment", s->tr.selector,
				   (unsigned long long)s->tr.base);
	if (s->cr3 != LAYOUT_PGTABLE)
		return log_set_err(-EINVAL, err, errlen, "cr3 %#llx: not ccvm's page tables",
				   (unsigned long long)s->cr3);
	if (!(s->cr0 & CR0_PG) || !(s->cr0 & CR0_WP) || !(s->efer & EFER_LMA))
		return log_set_err(-EINVAL, err, errlen,
				   "cr0 %#llx / efer %#llx: not long mode with "
				   "write protection",
				   (unsigned long long)s->cr0, (unsigned long long)s->efer);
	for (size_t i = 0; i < sizeof(s->interrupt_bitmap) / sizeof(s->interrupt_bitmap[0]); i++)
		if (s->interrupt_bitmap[i])
			return log_set_err(-EINVAL, err, errlen,
					   "interrupt_bitmap: a pending interrupt");
	if (s->fs.base >= USER_TOP || s->gs.base >= USER_TOP)
		return log_set_err(-EINVAL, err, errlen,
				   "fs/gs base %#llx/%#llx: not user addresses",
				   (unsigned long long)s->fs.base, (unsigned long long)s->gs.base);
	return 0;
}

static int kvm_check_msrs(const struct kvm_saved *st, char *err, size_t errlen)
{
	if (st->n_msrs != KVM_FIXED_MSRS)
		return log_set_err(-EINVAL, err, errlen, "n_msrs %u (ccvm saves %d)", st->n_msrs,
				   KVM_FIXED_MSRS);
	for (unsigned i = 0; i < KVM_FIXED_MSRS; i++) {
		if (st->msrs[i].index != kvm_fixed_msrs[i].index)
			return log_set_err(-EINVAL, err, errlen, "msr %#x: not one ccvm saves",
					   st->msrs[i].index);
		if (st->msrs[i].data != kvm_fixed_msrs[i].data)
			return log_set_err(-EINVAL, err, errlen, "msr %#x = %#llx: ccvm sets %#llx",
					   st->msrs[i].index, (unsigned long long)st->msrs[i].data,
					   (unsigned long long)kvm_fixed_msrs[i].data);
	}
	return 0;
}

static int kvm_check_events(const struct kvm_saved *st, char *err, size_t errlen)
{
	const struct kvm_vcpu_events *e = &st->events;

	if ((e->exception.injected || e->exception.pending) && e->exception.nr >= KVM_EXC_VECTORS)
		return log_set_err(-EINVAL, err, errlen, "events.exception: vector %u",
				   e->exception.nr);
	if (e->interrupt.injected)
		return log_set_err(-EINVAL, err, errlen, "events.interrupt: an injected interrupt");
	if (e->nmi.injected || e->nmi.pending)
		return log_set_err(-EINVAL, err, errlen, "events.nmi: a pending NMI");
	if (e->smi.smm || e->smi.pending)
		return log_set_err(-EINVAL, err, errlen, "events.smi: system management mode");
	if (e->triple_fault.pending)
		return log_set_err(-EINVAL, err, errlen, "events.triple_fault: pending");
	return 0;
}

int kvm_saved_check(const struct kvm_saved *st, char *err, size_t errlen)
{
	int rc;

	if (st->magic != KVM_SAVED_MAGIC || st->size != sizeof(*st))
		return log_set_err(-EINVAL, err, errlen,
				   "magic %#x / size %u: not a vCPU state of this "
				   "ccvm",
				   st->magic, st->size);
	rc = kvm_check_cpl(st, err, errlen);
	if (!rc)
		rc = kvm_check_flags(st, err, errlen);
	if (!rc)
		rc = kvm_check_tables(st, err, errlen);
	if (!rc)
		rc = kvm_check_msrs(st, err, errlen);
	if (!rc)
		rc = kvm_check_events(st, err, errlen);
	return rc;
}
