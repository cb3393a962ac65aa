/*
 * elf.h - parse and validate an x86-64 ELF executable held in a buffer.
 */
#ifndef CCVM_ELF_H
#define CCVM_ELF_H

#include <stddef.h>
#include <stdint.h>

#define ELF_MAX_LOADS 16
#define ELF_ERR_LEN   256

struct elf_load {
	uint64_t vaddr;   /* unbiased virtual address of the segment */
	uint64_t offset;  /* file offset */
	uint64_t filesz;
	uint64_t memsz;
	uint32_t flags;   /* PF_R/PF_W/PF_X */
};

struct elf_info {
	int is_pie;            /* ET_DYN: loaded at a base the loader chooses */
	uint64_t entry;        /* unbiased */
	uint64_t phdr_vaddr;   /* unbiased address of the program headers in memory, 0 if not loaded */
	uint16_t phnum;
	uint16_t phentsize;
	uint64_t lo, hi;       /* unbiased page-aligned extent of all PT_LOAD segments */
	uint64_t align;        /* largest PT_LOAD alignment (at least a page) */
	int n_loads;
	struct elf_load loads[ELF_MAX_LOADS];
	char interp[256];      /* PT_INTERP path, empty for a static program */
};

/*
 * elf_parse - validate @buf (@len bytes, a whole file) as an x86-64 executable.
 * Returns 0, or -ENOEXEC with a message for the user in @err (why it is refused).
 */
int elf_parse(const uint8_t *buf, size_t len, struct elf_info *info, char err[ELF_ERR_LEN]);

#endif
