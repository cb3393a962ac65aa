/*
 * x86.h - named architectural constants used to set up a long-mode vCPU.
 *
 * Only what ccvm programs into the CPU: control-register bits, EFER, MSR numbers,
 * page-table entry bits, segment selectors of our GDT and exception vector numbers;
 * and the neutral register types the personality and the platform share.
 */
#ifndef CCVM_X86_H
#define CCVM_X86_H

#include "pages.h"

#include <stdint.h>

/* Control register 0 */
#define CR0_PE (1ULL << 0)
#define CR0_MP (1ULL << 1)
#define CR0_ET (1ULL << 4)
#define CR0_NE (1ULL << 5)
#define CR0_WP (1ULL << 16)
#define CR0_AM (1ULL << 18)
#define CR0_PG (1ULL << 31)

/* Control register 4 */
#define CR4_PAE        (1ULL << 5)
#define CR4_OSFXSR     (1ULL << 9)
#define CR4_OSXMMEXCPT (1ULL << 10)
#define CR4_OSXSAVE    (1ULL << 18)

/* Extended feature enable register */
#define EFER_SCE (1ULL << 0)
#define EFER_LME (1ULL << 8)
#define EFER_LMA (1ULL << 10)
#define EFER_NXE (1ULL << 11)

/* RFLAGS */
#define RFLAGS_FIXED (1ULL << 1) /* reserved bit that always reads as 1 */
#define RFLAGS_TF    (1ULL << 8)
#define RFLAGS_IF    (1ULL << 9)
#define RFLAGS_DF    (1ULL << 10)
#define RFLAGS_IOPL  (3ULL << 12)
#define RFLAGS_NT    (1ULL << 14)
#define RFLAGS_AC    (1ULL << 18)
#define RFLAGS_VM    (1ULL << 17)
#define RFLAGS_VIF   (1ULL << 19)
#define RFLAGS_VIP   (1ULL << 20)
/* CF, 1, PF, AF, ZF, SF, TF, IF, DF, OF, IOPL, NT, RF, VM, AC, VIF, VIP, ID: the rest is reserved */
#define RFLAGS_DEFINED 0x3F7FD7ULL
/* What `syscall` clears (MSR_SYSCALL_MASK): the trap stub runs with these off. */
#define RFLAGS_SYSCALL_MASK (RFLAGS_TF | RFLAGS_DF | RFLAGS_IF | RFLAGS_IOPL | RFLAGS_AC | RFLAGS_NT)
/* The bits SYSRET restores from R11 (it clears RF and VM). */
#define RFLAGS_SYSRET_MASK 0x3C7FD7ULL
/* What a program at CPL3 and IOPL 0 may hold: CF, PF, AF, ZF, SF, TF, DF, OF, NT, AC
 * and ID. Never IOPL, VM, VIF, VIP or RF; IF is always on, as under Linux. */
#define RFLAGS_USER 0x244DD5ULL

/* RFLAGS for a return to CPL3 from whatever @f a program or an image supplied: the one
 * place every such return (sysret, signal delivery and return, a new thread, a
 * restored one) takes its flags from. */
static inline uint64_t x86_user_rflags(uint64_t f)
{
	return (f & RFLAGS_USER) | RFLAGS_FIXED | RFLAGS_IF;
}

/* MSRs */
#define MSR_STAR         0xC0000081
#define MSR_LSTAR        0xC0000082
#define MSR_CSTAR        0xC0000083
#define MSR_SYSCALL_MASK 0xC0000084
#define MSR_IA32_TSC     0x00000010
/* Paravirtual MSRs of the PVM hypervisor (kvm_pvm), which our nested KVM is: a
 * syscall from user mode switches to MSR_PVM_SWITCH_CR3 and MSR_PVM_SUPERVISOR_RSP. */
#define MSR_PVM_SUPERVISOR_RSP 0x4b564df2
#define MSR_PVM_SWITCH_CR3     0x4b564df7

/* XCR0 state components */
#define XCR0_X87       (1ULL << 0)
#define XCR0_SSE       (1ULL << 1)
#define XCR0_AVX       (1ULL << 2)
#define XCR0_OPMASK    (1ULL << 5)
#define XCR0_ZMM_HI256 (1ULL << 6)
#define XCR0_HI16_ZMM  (1ULL << 7)

/* Page-table entries (all levels) */
#define PTE_P  (1ULL << 0)
#define PTE_RW (1ULL << 1)
#define PTE_US (1ULL << 2)
#define PTE_PS (1ULL << 7) /* in a page-directory entry: maps a 2 MiB page */
#define PTE_ADDR_MASK 0x000FFFFFFFFFF000ULL

/* Our GDT: the order SYSCALL/SYSRET require (STAR fields), as Linux lays it out. */
#define GDT_KERNEL_CS 0x10
#define GDT_KERNEL_DS 0x18
#define GDT_USER_CS32 0x23 /* STAR[63:48]: SYSRET derives the user selectors from it */
#define GDT_USER_DS   0x2b
#define GDT_USER_CS   0x33
#define GDT_TSS       0x40
#define GDT_ENTRIES   10 /* null, unused, kcs, kds, ucs32, uds, ucs, unused, tss (2 slots) */

/* Segment descriptor types (the 4-bit type field) */
#define SEG_TYPE_CODE_XR  11 /* execute/read, accessed */
#define SEG_TYPE_DATA_RW  3  /* read/write, accessed */
#define SEG_TYPE_TSS_BUSY 11
#define SEG_TYPE_TSS_AVAIL 9
#define GATE_TYPE_INTR    14

/* Exception vectors */
enum x86_vector {
	X86_DE = 0,
	X86_DB = 1,
	X86_NMI = 2,
	X86_BP = 3,
	X86_OF = 4,
	X86_BR = 5,
	X86_UD = 6,
	X86_NM = 7,
	X86_DF = 8,
	X86_TS = 10,
	X86_NP = 11,
	X86_SS = 12,
	X86_GP = 13,
	X86_PF = 14,
	X86_MF = 16,
	X86_AC = 17,
	X86_MC = 18,
	X86_XM = 19,
	X86_VE = 20,
	X86_CP = 21,
	X86_NR_EXCEPTIONS = 32,
};

/* Page-fault error code bits */
#define PF_ERR_P  (1U << 0)
#define PF_ERR_W  (1U << 1)
#define PF_ERR_U  (1U << 2)
#define PF_ERR_ID (1U << 4)

#define GIB         (1ULL << 30)

/* A user thread's general registers, as the personality reads and writes them: the
 * platform (vmm/kvm/) converts to and from its own form at each exit and entry. */
struct cpu_regs {
	uint64_t rax, rbx, rcx, rdx, rsi, rdi, rsp, rbp;
	uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
	uint64_t rip, rflags;
};

/* The segment bases a program may set (arch_prctl): all of its segment state that is
 * not fixed by ccvm's GDT. */
struct cpu_segs {
	uint64_t fs_base, gs_base;
};

/* The registers of a thread at the return from the system call it is in, as SYSRET
 * leaves them (RIP from RCX, RFLAGS from R11). */
static inline void x86_sysret_regs(struct cpu_regs *r)
{
	r->rip = r->rcx;
	r->rflags = x86_user_rflags(r->r11);
}

/* One CPUID leaf as the platform offers it to guests. */
struct cpuid_leaf {
	uint32_t function, index;
	uint32_t eax, ebx, ecx, edx;
};

#endif
