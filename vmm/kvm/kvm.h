/*
 * kvm.h - the platform: the one place ccvm talks to KVM.
 *
 * Every KVM ioctl and the only includes of linux/kvm.h are in this folder (`make
 * layers` checks it), as gVisor keeps its platform/kvm and Solo5 its hvt_kvm. The rest
 * of the monitor sees a VM over a RAM mapping, vCPUs that run to their next exit,
 * neutral registers (struct cpu_regs in base/x86.h), a kick, a vCPU's saved state as
 * an opaque record, and the dirty log of RAM. The vCPUs are x86-64 in long mode with
 * the program at CPL3 over ccvm's own tables in the system area (mmu/cpu_tables.h).
 */
#ifndef CCVM_KVM_H
#define CCVM_KVM_H

#include "../../base/x86.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kvm_vm;
struct kvm_cpu;

/* Open /dev/kvm, check what ccvm needs, and create a VM whose guest-physical 0..@size
 * is the host mapping @ram (one memory slot). 0 or -errno, with the reason logged. */
int kvm_vm_create(uint8_t *ram, uint64_t size, struct kvm_vm **out);
#define CPU_TABLE_MAX_LEAVES 256 /* leaves a VM's CPUID table has at most */

/* The CPUID table every vCPU of @k is given, as neutral leaves (at most @max), and the
 * XCR0 its guests may enable: how many leaves were written. */
unsigned kvm_vm_cpuid(const struct kvm_vm *k, struct cpuid_leaf *out, unsigned max, uint64_t *xcr0);
void kvm_vm_destroy(struct kvm_vm *k);

/*
 * The dirty log of RAM, in bitmaps of one bit per 4 KiB page. kvm_dirty_manual once,
 * first: reading the log then re-protects nothing behind the caller's back, and
 * logging starts with every page marked dirty and none write-protected. Logging is
 * switched on only for a measuring window; kvm_dirty_clear clears the bits set in
 * @pages, which write-protects those pages until their next write.
 */
int kvm_dirty_manual(struct kvm_vm *k);
int kvm_dirty_logging(struct kvm_vm *k, bool on);
int kvm_dirty_clear(struct kvm_vm *k, uint64_t *pages);
int kvm_dirty_get(struct kvm_vm *k, uint64_t *bitmap);

/* Another window of guest memory (docs/processes.md): guest-physical @gpa..+@size is
 * the host mapping @host, as memory slot @slot (1 and up; slot 0 is RAM). @size 0
 * takes the slot away. 0 or -errno. */
int kvm_vm_window(struct kvm_vm *k, int slot, uint64_t gpa, uint8_t *host, uint64_t size);
/* Make KVM forget every translation it built from the guest's page tables, so that
 * pages once used as tables may serve as tables again (docs/processes.md): a memory
 * slot of its own made and taken away, which KVM answers by dropping all its shadow
 * pages. Callable while vCPUs run. 0 or -errno. */
int kvm_vm_forget(struct kvm_vm *k);

/* Where a new vCPU's program starts, and over which page tables (0: the first
 * process's, at LAYOUT_PGTABLE). */
struct cpu_entry {
	uint64_t rip, rsp;
	uint64_t fs_base, gs_base;
	uint64_t cr3;
};

/* A vCPU with id @id (its own TSS and exception stack), in user mode at @e. */
int kvm_cpu_create(struct kvm_vm *k, int id, const struct cpu_entry *e, struct kvm_cpu **out);
void kvm_cpu_destroy(struct kvm_cpu *c);

/* Give the vCPU a new thread: registers @r, segment bases from @e, and the FPU, SSE and
 * AVX state of vCPU @fpu_of (the thread that made it, out of its run; NULL: its own). */
int kvm_cpu_start_thread(struct kvm_cpu *c, const struct cpu_regs *r, const struct cpu_entry *e,
			 struct kvm_cpu *fpu_of);

enum cpu_exit_kind {
	CPU_EXIT_IO,         /* port I/O: @port, @out */
	CPU_EXIT_KICK,       /* the run was cut short (kvm_cpu_kick, or a signal) */
	CPU_EXIT_INTR,       /* the guest left on a host interrupt: run it again */
	CPU_EXIT_HLT,
	CPU_EXIT_SHUTDOWN,   /* triple fault */
	CPU_EXIT_INTERNAL,   /* KVM could not go on (emulation failure): @detail */
	CPU_EXIT_FAIL_ENTRY, /* the hardware refused the entry: @detail */
	CPU_EXIT_MMIO,       /* an access outside RAM */
	CPU_EXIT_OTHER,
};

struct cpu_exit {
	enum cpu_exit_kind kind;
	uint32_t reason;  /* KVM's own number for it, for crash reports */
	uint64_t detail;  /* internal error suberror, or hardware entry failure reason */
	uint16_t port;
	bool out;
};

/* Run until the next exit: 0 with @e filled, or -errno when the vCPU cannot run. */
int kvm_cpu_run(struct kvm_cpu *c, struct cpu_exit *e);

/* Make the current or next run return at once (CPU_EXIT_KICK). The caller then
 * signals the vCPU's thread, so a kick just before an entry is not lost. */
void kvm_cpu_kick(struct kvm_cpu *c);

/* Where the thread is: after an exit, or after a kick, as it last stopped (with any
 * registers put since). */
struct cpu_view {
	struct cpu_regs regs;
	struct cpu_segs segs;
	unsigned cpl;   /* CS.DPL */
	uint64_t cr2;   /* the last page fault's address */
};
int kvm_cpu_get(struct kvm_cpu *c, struct cpu_view *v);

/* The next run resumes the program at CPL3 with @r, and with @s when not NULL (else
 * the segment bases stay). Costs no ioctl: the registers travel with the entry. */
void kvm_cpu_put(struct kvm_cpu *c, const struct cpu_regs *r, const struct cpu_segs *s);
/* The next run uses the page tables at @cr3. 0 or -errno. */
int kvm_cpu_set_cr3(struct kvm_cpu *c, uint64_t cr3);

/* The FPU state in the standard XSAVE form a signal frame holds: its length (at most
 * @cap), and the components enabled in *@xfeatures. Load takes @len bytes of it. */
int kvm_cpu_fpu_save(struct kvm_cpu *c, void *buf, size_t cap, uint64_t *xfeatures);
int kvm_cpu_fpu_load(struct kvm_cpu *c, const void *buf, size_t len);

/* The guest TSC's rate, and its offset from the host TSC (constant for the VM's life). */
int kvm_cpu_tsc(struct kvm_cpu *c, uint32_t *khz, int64_t *offset);

/*
 * A vCPU's architectural state as a snapshot records it: kvm_saved_size() bytes, the
 * same layout on every ccvm of this version (the image's vcpus section is an array of
 * them). kvm_cpu_save captures a vCPU out of its run; one in the middle of a system
 * call (@in_syscall) is recorded before its `syscall` instruction, so a restored guest
 * makes the call again. kvm_saved_check tells whether a record from an image holds
 * only what ccvm itself could have saved (0, or -EINVAL with the field in @err; needs
 * no KVM). kvm_cpu_load loads a checked record into a fresh vCPU.
 */
struct kvm_saved;
size_t kvm_saved_size(void);
struct kvm_saved *kvm_saved_nth(void *array, size_t i);
int kvm_cpu_save(struct kvm_cpu *c, bool in_syscall, struct kvm_saved *out);
int kvm_saved_check(const struct kvm_saved *st, char *err, size_t errlen);
int kvm_cpu_load(struct kvm_cpu *c, const struct kvm_saved *st);

#endif
