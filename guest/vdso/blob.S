/*
 * blob.S - embeds the linked vDSO image in the ccvm binary; the personality copies it
 * into every guest (vmm/linux/proc.c).
 */
	.section .rodata
	.balign 4096
	.globl ccvm_vdso_image
	.globl ccvm_vdso_image_end
ccvm_vdso_image:
	.incbin VDSO_SO
ccvm_vdso_image_end:
	.section .note.GNU-stack,"",@progbits
