/*
 * boot.S - the few instructions of boot of the QEMU peer's zipfbench guest.
 *
 * QEMU loads this flat image at 1 MiB through its multiboot loader (-kernel; the
 * header's address fields, since the loader takes only 32-bit ELF) and enters
 * _start32 in 32-bit protected mode without paging. We identity-map the first 4 GiB
 * with 2 MiB pages that user mode may read and write, enable SSE and long mode, load a
 * GDT with 64-bit kernel and user segments, and call zg_main (zipfguest.c) with the
 * multiboot information. zg_main drops to CPL3 at once, because under nested KVM guest
 * kernel mode is emulated, slow, and without x87 (KVM's emulator has none), while user
 * mode runs natively: the same footing as a ccvm guest. There is no IDT: a fault
 * triple-faults, and QEMU (-no-reboot) exits, which the driver reports as a failed run.
 */
#define MB_MAGIC      0x1BADB002
#define MB_FLAGS      0x00010002 /* memory information; load addresses in the header */
#define PTE_PUWS      0x87       /* present, writable, user, 2 MiB page */
#define PTE_PUW       0x07       /* present, writable, user */
#define CR0_PG_MP_PE  0x80000003
#define CR0_EM        0x00000004
#define CR4_PAE_SSE   0x00000620 /* PAE, OSFXSR, OSXMMEXCPT */
#define MSR_EFER      0xC0000080
#define EFER_LME      0x00000100
#define SEL_KCODE     0x08
#define SEL_KDATA     0x10
#define GIB_MAPPED    4

	.section .multiboot, "a"
	.align 4
mb_header:
	.long MB_MAGIC
	.long MB_FLAGS
	.long -(MB_MAGIC + MB_FLAGS)
	.long mb_header       /* header_addr */
	.long _load_start     /* load_addr */
	.long _load_end       /* load_end_addr */
	.long _bss_end        /* bss_end_addr: the loader zeroes up to here */
	.long _start32        /* entry_addr */

	.text
	.code32
	.globl _start32
_start32:
	cli
	movl %ebx, mb_info
	movl $boot_stack_top, %esp

	/* pml4[0] -> pdpt; pdpt[i] -> pd + i * 4096; pd[j] maps (j << 21). */
	movl $pdpt, %eax
	orl $PTE_PUW, %eax
	movl %eax, pml4
	xorl %ecx, %ecx
1:	movl %ecx, %eax
	shll $12, %eax
	addl $pd, %eax
	orl $PTE_PUW, %eax
	movl %eax, pdpt(, %ecx, 8)
	incl %ecx
	cmpl $GIB_MAPPED, %ecx
	jb 1b
	xorl %ecx, %ecx
2:	movl %ecx, %eax
	shll $21, %eax
	orl $PTE_PUWS, %eax
	movl %eax, pd(, %ecx, 8)
	movl %ecx, %eax
	shrl $11, %eax          /* the high half: bits 32+ of (j << 21) */
	movl %eax, pd + 4(, %ecx, 8)
	incl %ecx
	cmpl $(GIB_MAPPED * 512), %ecx
	jb 2b

	movl %cr4, %eax
	orl $CR4_PAE_SSE, %eax
	movl %eax, %cr4
	movl $pml4, %eax
	movl %eax, %cr3
	movl $MSR_EFER, %ecx
	rdmsr
	orl $EFER_LME, %eax
	wrmsr
	movl %cr0, %eax
	andl $~CR0_EM, %eax
	orl $CR0_PG_MP_PE, %eax
	movl %eax, %cr0
	lgdt gdt_ptr
	ljmp $SEL_KCODE, $start64

	.code64
start64:
	movw $SEL_KDATA, %ax
	movw %ax, %ds
	movw %ax, %es
	movw %ax, %ss
	movw %ax, %fs
	movw %ax, %gs
	movq $boot_stack_top, %rsp
	movl mb_info, %edi      /* (no x87 here: KVM's emulator of CPL0 code has none) */
	call zg_main
3:	hlt
	jmp 3b

	.section .rodata
	.align 16
gdt:
	.quad 0                        /* null */
	.quad 0x00AF9A000000FFFF       /* 0x08 kernel code, 64-bit */
	.quad 0x00CF92000000FFFF       /* 0x10 kernel data */
	.quad 0x00CFF2000000FFFF       /* 0x18 user data (selector 0x1b) */
	.quad 0x00AFFA000000FFFF       /* 0x20 user code, 64-bit (selector 0x23) */
gdt_end:
gdt_ptr:
	.word gdt_end - gdt - 1
	.long gdt

	.bss
	.align 4096
pml4:	.skip 4096
pdpt:	.skip 4096
pd:	.skip 4096 * GIB_MAPPED
	.align 16
boot_stack:
	.skip 16384
boot_stack_top:
mb_info:
	.skip 4

	.section .note.GNU-stack, "", @progbits
