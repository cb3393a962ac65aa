/*
 * blob.S - embeds the exitless socket library in the ccvm binary; the monitor serves
 * it to the guest as FASTIO_PATH (vmm/linux/fastio.c).
 */
	.section .rodata
	.balign 16
	.globl ccvm_fastio_lib
	.globl ccvm_fastio_lib_end
ccvm_fastio_lib:
	.incbin FASTIO_SO
ccvm_fastio_lib_end:
	.section .note.GNU-stack,"",@progbits
