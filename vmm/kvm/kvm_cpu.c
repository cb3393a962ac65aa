/*
 * kvm_cpu.c - a KVM vCPU that runs a Linux program at CPL3, to its next exit.
 *
 * The vCPU starts directly in 64-bit user mode (no boot code: guest kernel mode is
 * emulated and slow on our hosts). Registers travel in the kvm_run sync area
 * (KVM_CAP_SYNC_REGS): an exit leaves them there, and a return to the program writes
 * them back there and marks them dirty, so a system call costs no ioctl beyond the
 * run. Where `syscall` or an exception entered CPL0, the return sets CS and SS back to
 * the user selectors. Kicks follow the usual KVM pattern: set immediate_exit, then the
 * caller signals the thread.
 */
#include "kvm_impl.h"
#include "../../base/log.h"
#include "../../mmu/cpu_tables.h"
#include "../../mmu/layout.h"

#include <cpuid.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <x86intrin.h>

#define XSAVE_LEAF      0xD
#define XSAVE_LEGACY    576 /* the legacy area and the header: the least XSAVE holds */
#define FPU_FCW_DEFAULT 0x37F
#define MXCSR_DEFAULT   0x1F80

_Static_assert(sizeof(struct cpu_regs) == sizeof(struct kvm_regs), "the same registers");

const struct kvm_msr_entry kvm_fixed_msrs[KVM_FIXED_MSRS] = {
    {.index = MSR_STAR, .data = ((uint64_t)GDT_USER_CS32 << 48) | ((uint64_t)GDT_KERNEL_CS << 32)},
    {.index = MSR_LSTAR, .data = STUB_SYSCALL},
    {.index = MSR_CSTAR, .data = STUB_SYSCALL},
    {.index = MSR_SYSCALL_MASK, .data = RFLAGS_SYSCALL_MASK},
};

void kvm_regs_from(struct kvm_regs *k, const struct cpu_regs *r)
{
	*k = (struct kvm_regs){ .rax = r->rax, .rbx = r->rbx, .rcx = r->rcx, .rdx = r->rdx,
				.rsi = r->rsi, .rdi = r->rdi, .rsp = r->rsp, .rbp = r->rbp,
				.r8 = r->r8, .r9 = r->r9, .r10 = r->r10, .r11 = r->r11,
				.r12 = r->r12, .r13 = r->r13, .r14 = r->r14, .r15 = r->r15,
				.rip = r->rip, .rflags = r->rflags };
}

void kvm_regs_to(struct cpu_regs *r, const struct kvm_regs *k)
{
	*r = (struct cpu_regs){ .rax = k->rax, .rbx = k->rbx, .rcx = k->rcx, .rdx = k->rdx,
				.rsi = k->rsi, .rdi = k->rdi, .rsp = k->rsp, .rbp = k->rbp,
				.r8 = k->r8, .r9 = k->r9, .r10 = k->r10, .r11 = k->r11,
				.r12 = k->r12, .r13 = k->r13, .r14 = k->r14, .r15 = k->r15,
				.rip = k->rip, .rflags = k->rflags };
}

void kvm_seg_user_code(struct kvm_segment *s)
{
	*s = (struct kvm_segment){ .base = 0, .limit = 0xFFFFFFFF, .selector = GDT_USER_CS,
				   .type = SEG_TYPE_CODE_XR, .present = 1, .dpl = 3, .db = 0,
				   .s = 1, .l = 1, .g = 1 };
}

void kvm_seg_user_data(struct kvm_segment *s, uint64_t base)
{
	*s = (struct kvm_segment){ .base = base, .limit = 0xFFFFFFFF, .selector = GDT_USER_DS,
				   .type = SEG_TYPE_DATA_RW, .present = 1, .dpl = 3, .db = 1,
				   .s = 1, .l = 0, .g = 1 };
}

/* The task register of vCPU @id: its own TSS, so its own exception stack. */
void kvm_own_tr(int id, struct kvm_segment *tr)
{
	*tr = (struct kvm_segment){ .base = cpu_tss_base(id), .limit = cpu_tss_limit(id),
				    .selector = GDT_TSS, .type = SEG_TYPE_TSS_BUSY, .present = 1,
				    .g = 0 };
}

static int kvm_setup_sregs(struct kvm_cpu *c, const struct cpu_entry *e)
{
	struct kvm_sregs sr;

	if (ioctl(c->fd, KVM_GET_SREGS, &sr) < 0)
		return -errno;
	kvm_seg_user_code(&sr.cs);
	kvm_seg_user_data(&sr.ss, 0);
	kvm_seg_user_data(&sr.ds, 0);
	kvm_seg_user_data(&sr.es, 0);
	kvm_seg_user_data(&sr.fs, e->fs_base);
	kvm_seg_user_data(&sr.gs, e->gs_base);
	kvm_own_tr(c->id, &sr.tr);
	sr.ldt = (struct kvm_segment){ .unusable = 1 };
	sr.gdt.base = LAYOUT_GDT;
	sr.gdt.limit = GDT_LIMIT;
	sr.idt.base = LAYOUT_IDT;
	sr.idt.limit = IDT_LIMIT;
	sr.cr0 = CR0_PE | CR0_MP | CR0_ET | CR0_NE | CR0_WP | CR0_AM | CR0_PG;
	sr.cr3 = e->cr3 ? e->cr3 : LAYOUT_PGTABLE;
	sr.cr4 = CR4_PAE | CR4_OSFXSR | CR4_OSXMMEXCPT | CR4_OSXSAVE;
	sr.efer = EFER_LME | EFER_LMA | EFER_SCE | EFER_NXE;
	return ioctl(c->fd, KVM_SET_SREGS, &sr) < 0 ? -errno : 0;
}

static int kvm_setup_msrs(struct kvm_cpu *c)
{
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e[KVM_FIXED_MSRS];
	} m = { .hdr.nmsrs = KVM_FIXED_MSRS };

	memcpy(m.e, kvm_fixed_msrs, sizeof(m.e));
	return ioctl(c->fd, KVM_SET_MSRS, &m) != KVM_FIXED_MSRS ? -EIO : 0;
}

static int kvm_setup_fpu(struct kvm_cpu *c)
{
	struct kvm_xcrs xcrs = { .nr_xcrs = 1, .xcrs[0] = { .xcr = 0, .value = c->vm->xcr0 } };
	struct kvm_fpu fpu = { .fcw = FPU_FCW_DEFAULT, .mxcsr = MXCSR_DEFAULT };

	if (ioctl(c->fd, KVM_SET_XCRS, &xcrs) < 0 || ioctl(c->fd, KVM_SET_FPU, &fpu) < 0)
		return -errno;
	return 0;
}

static int kvm_setup_regs(struct kvm_cpu *c, const struct cpu_entry *e)
{
	struct kvm_regs r = { .rip = e->rip, .rsp = e->rsp, .rflags = RFLAGS_FIXED | RFLAGS_IF };

	return ioctl(c->fd, KVM_SET_REGS, &r) < 0 ? -errno : 0;
}

static int kvm_cpu_setup(struct kvm_cpu *c, const struct cpu_entry *e)
{
	int rc;

	if (ioctl(c->fd, KVM_SET_CPUID2, c->vm->cpuid) < 0) {
		rc = -errno;
		log_err("KVM_SET_CPUID2: %s", strerror(errno));
		return rc;
	}
	if ((rc = kvm_setup_sregs(c, e)) || (rc = kvm_setup_msrs(c)) || (rc = kvm_setup_fpu(c)) ||
	    (rc = kvm_setup_regs(c, e))) {
		log_err("setting up vCPU %d for user mode: %s", c->id, strerror(-rc));
		return rc;
	}
	c->run->kvm_valid_regs = KVM_SYNC_X86_REGS | KVM_SYNC_X86_SREGS;
	return 0;
}

int kvm_cpu_create(struct kvm_vm *k, int id, const struct cpu_entry *e, struct kvm_cpu **out)
{
	struct kvm_cpu *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	*c = (struct kvm_cpu){ .vm = k, .id = id, .run = MAP_FAILED };
	c->fd = ioctl(k->fd, KVM_CREATE_VCPU, id);
	if (c->fd < 0) {
		rc = -errno;
		log_err("KVM_CREATE_VCPU %d: %s", id, strerror(errno));
		goto err_free;
	}
	c->run = mmap(NULL, (size_t)k->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
	if (c->run == MAP_FAILED) {
		rc = -errno;
		log_err("mmap of the kvm_run area: %s", strerror(errno));
		goto err_close;
	}
	rc = kvm_cpu_setup(c, e);
	if (rc)
		goto err_unmap;
	*out = c;
	return 0;

err_unmap:
	munmap(c->run, (size_t)k->run_size);
err_close:
	close(c->fd);
err_free:
	free(c);
	return rc;
}

void kvm_cpu_destroy(struct kvm_cpu *c)
{
	if (!c)
		return;
	munmap(c->run, (size_t)c->vm->run_size);
	close(c->fd);
	free(c);
}

int kvm_cpu_start_thread(struct kvm_cpu *c, const struct cpu_regs *r, const struct cpu_entry *e,
			 struct kvm_cpu *fpu_of)
{
	struct kvm_xsave *xsave = malloc(sizeof(*xsave));
	struct kvm_regs kr;
	int rc;

	if (!xsave)
		return -ENOMEM;
	kvm_regs_from(&kr, r);
	/* The parent is out of its run (it is the caller's own vCPU): its state is stable.
	 * Without one (a program started from outside), the vCPU keeps its own. */
	if (fpu_of && ioctl(fpu_of->fd, KVM_GET_XSAVE, xsave) < 0) {
		rc = -errno;
		goto out;
	}
	rc = kvm_setup_sregs(c, e);
	if (!rc && (ioctl(c->fd, KVM_SET_REGS, &kr) < 0 ||
		    (fpu_of && ioctl(c->fd, KVM_SET_XSAVE, xsave) < 0)))
		rc = -errno;
	/* Registers a finished thread left in the sync area must not overwrite these. */
	c->run->kvm_dirty_regs = 0;
	c->fresh = false;
out:
	free(xsave);
	return rc;
}

static enum cpu_exit_kind kvm_exit_kind(uint32_t reason)
{
	switch (reason) {
	case KVM_EXIT_IO: return CPU_EXIT_IO;
	case KVM_EXIT_INTR: return CPU_EXIT_INTR;
	case KVM_EXIT_HLT: return CPU_EXIT_HLT;
	case KVM_EXIT_SHUTDOWN: return CPU_EXIT_SHUTDOWN;
	case KVM_EXIT_INTERNAL_ERROR: return CPU_EXIT_INTERNAL;
	case KVM_EXIT_FAIL_ENTRY: return CPU_EXIT_FAIL_ENTRY;
	case KVM_EXIT_MMIO: return CPU_EXIT_MMIO;
	default: return CPU_EXIT_OTHER;
	}
}

int kvm_cpu_run(struct kvm_cpu *c, struct cpu_exit *e)
{
	struct kvm_run *run = c->run;

	if (ioctl(c->fd, KVM_RUN, 0) < 0) {
		if (errno != EINTR && errno != EAGAIN)
			return -errno;
		__atomic_store_n(&run->immediate_exit, 0, __ATOMIC_SEQ_CST);
		c->fresh = false;
		*e = (struct cpu_exit){ .kind = CPU_EXIT_KICK, .reason = KVM_EXIT_INTR };
		return 0;
	}
	c->fresh = true;
	*e = (struct cpu_exit){ .kind = kvm_exit_kind(run->exit_reason), .reason = run->exit_reason };
	if (run->exit_reason == KVM_EXIT_IO) {
		e->port = run->io.port;
		e->out = run->io.direction == KVM_EXIT_IO_OUT;
	} else if (run->exit_reason == KVM_EXIT_INTERNAL_ERROR) {
		e->detail = run->internal.suberror;
	} else if (run->exit_reason == KVM_EXIT_FAIL_ENTRY) {
		e->detail = run->fail_entry.hardware_entry_failure_reason;
	}
	return 0;
}

void kvm_cpu_kick(struct kvm_cpu *c)
{
	__atomic_store_n(&c->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
}

/* After a kick the sync area may be stale: read back what is not waiting to be
 * loaded (registers put since the exit are the thread's state). */
static int kvm_cpu_refresh(struct kvm_cpu *c)
{
	struct kvm_run *run = c->run;

	if (c->fresh)
		return 0;
	if (!(run->kvm_dirty_regs & KVM_SYNC_X86_REGS) &&
	    ioctl(c->fd, KVM_GET_REGS, &run->s.regs.regs) < 0)
		return -errno;
	if (!(run->kvm_dirty_regs & KVM_SYNC_X86_SREGS) &&
	    ioctl(c->fd, KVM_GET_SREGS, &run->s.regs.sregs) < 0)
		return -errno;
	c->fresh = true;
	return 0;
}

int kvm_cpu_get(struct kvm_cpu *c, struct cpu_view *v)
{
	const struct kvm_sregs *sr = &c->run->s.regs.sregs;
	int rc = kvm_cpu_refresh(c);

	if (rc)
		return rc;
	kvm_regs_to(&v->regs, &c->run->s.regs.regs);
	v->segs = (struct cpu_segs){ .fs_base = sr->fs.base, .gs_base = sr->gs.base };
	v->cpl = sr->cs.dpl;
	v->cr2 = sr->cr2;
	return 0;
}

void kvm_cpu_put(struct kvm_cpu *c, const struct cpu_regs *r, const struct cpu_segs *s)
{
	struct kvm_run *run = c->run;
	struct kvm_sregs *sr = &run->s.regs.sregs;

	kvm_regs_from(&run->s.regs.regs, r);
	run->kvm_dirty_regs |= KVM_SYNC_X86_REGS;
	if (s) {
		sr->fs.base = s->fs_base;
		sr->gs.base = s->gs_base;
		run->kvm_dirty_regs |= KVM_SYNC_X86_SREGS;
	}
	/* On PVM hosts the stubs already run at CPL3; elsewhere back to user selectors. */
	if (sr->cs.dpl != 3) {
		kvm_seg_user_code(&sr->cs);
		kvm_seg_user_data(&sr->ss, 0);
		run->kvm_dirty_regs |= KVM_SYNC_X86_SREGS;
	}
}

int kvm_cpu_set_cr3(struct kvm_cpu *c, uint64_t cr3)
{
	/* The segment registers travel with it: they must be the thread's, not what a
	 * thread that ran before left in the sync area (a new thread's first run). */
	int rc = kvm_cpu_refresh(c);

	if (rc)
		return rc;
	c->run->s.regs.sregs.cr3 = cr3;
	c->run->kvm_dirty_regs |= KVM_SYNC_X86_SREGS;
	return 0;
}

/* Bytes of the standard XSAVE area for what the host enabled (CPUID 0xD.0 EBX), at
 * most what KVM_GET_XSAVE gives: what a signal frame holds. */
static size_t kvm_xsave_size(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid_count(XSAVE_LEAF, 0, &a, &b, &c, &d) || b < XSAVE_LEGACY)
		return sizeof(struct kvm_xsave);
	return b < sizeof(struct kvm_xsave) ? b : sizeof(struct kvm_xsave);
}

int kvm_cpu_fpu_save(struct kvm_cpu *c, void *buf, size_t cap, uint64_t *xfeatures)
{
	struct kvm_xsave xs;
	struct kvm_xcrs xcrs;
	size_t len = kvm_xsave_size();

	if (ioctl(c->fd, KVM_GET_XSAVE, &xs) < 0 || ioctl(c->fd, KVM_GET_XCRS, &xcrs) < 0)
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

int kvm_cpu_fpu_load(struct kvm_cpu *c, const void *buf, size_t len)
{
	struct kvm_xsave xs;

	if (len > sizeof(xs))
		return -EINVAL;
	memset(&xs, 0, sizeof(xs));
	memcpy(&xs, buf, len);
	return ioctl(c->fd, KVM_SET_XSAVE, &xs) < 0 ? -errno : 0;
}

int kvm_cpu_tsc(struct kvm_cpu *c, uint32_t *khz, int64_t *offset)
{
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e;
	} m = { .hdr.nmsrs = 1, .e.index = MSR_IA32_TSC };
	int rate = ioctl(c->fd, KVM_GET_TSC_KHZ, 0);
	uint64_t before, after;

	if (rate <= 0)
		return -EIO;
	before = __rdtsc();
	if (ioctl(c->fd, KVM_GET_MSRS, &m) != 1)
		return -EIO;
	after = __rdtsc();
	*khz = (uint32_t)rate;
	*offset = (int64_t)(m.e.data - (before + (after - before) / 2));
	return 0;
}
