/*
 * elf.c - ELF executable validation.
 *
 * The program file comes from the user, and may be anything: a script, a 32-bit
 * binary, a truncated download, a fuzzed header. Every field that the loader will use
 * as an offset or a length is checked here against the file size and against
 * overflow, so that loading afterwards is plain copying. A refusal says what is wrong
 * in words a user can act on.
 */
#include "elf.h"
#include "../../base/pages.h"

#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Above the 47-bit user half of the address space nothing can be mapped. */
#define ELF_VADDR_LIMIT (1ULL << 47)

static int elf_fail(char err[ELF_ERR_LEN], const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int elf_fail(char err[ELF_ERR_LEN], const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, ELF_ERR_LEN, fmt, ap);
	va_end(ap);
	return -ENOEXEC;
}

static int elf_check_ident(const uint8_t *buf, size_t len, char err[ELF_ERR_LEN])
{
	if (len < EI_NIDENT || memcmp(buf, ELFMAG, SELFMAG) != 0) {
		if (len >= 2 && buf[0] == '#' && buf[1] == '!')
			return elf_fail(err, "a script, not an ELF executable (ccvm runs "
					     "x86-64 ELF programs; run the interpreter instead)");
		return elf_fail(err, "not an ELF file (no ELF magic in the first bytes)");
	}
	if (buf[EI_CLASS] == ELFCLASS32)
		return elf_fail(err, "a 32-bit ELF (ELFCLASS32); ccvm runs 64-bit x86-64 "
				     "programs only");
	if (buf[EI_CLASS] != ELFCLASS64)
		return elf_fail(err, "unknown ELF class %u", buf[EI_CLASS]);
	if (buf[EI_DATA] != ELFDATA2LSB)
		return elf_fail(err, "a big-endian ELF; x86-64 programs are little-endian");
	if (buf[EI_VERSION] != EV_CURRENT)
		return elf_fail(err, "unknown ELF version %u", buf[EI_VERSION]);
	if (len < sizeof(Elf64_Ehdr))
		return elf_fail(err, "truncated: %zu bytes, shorter than an ELF header (%zu)", len,
				sizeof(Elf64_Ehdr));
	return 0;
}

static int elf_check_header(const Elf64_Ehdr *eh, size_t len, char err[ELF_ERR_LEN])
{
	if (eh->e_machine != EM_X86_64)
		return elf_fail(err, "built for another machine (e_machine %u), not x86-64",
				eh->e_machine);
	if (eh->e_type != ET_EXEC && eh->e_type != ET_DYN)
		return elf_fail(err, "not an executable (e_type %u: %s)", eh->e_type,
				eh->e_type == ET_REL ? "an object file" :
				eh->e_type == ET_CORE ? "a core dump" : "unknown");
	if (eh->e_phentsize != sizeof(Elf64_Phdr))
		return elf_fail(err, "bad program header size %u (expected %zu)", eh->e_phentsize,
				sizeof(Elf64_Phdr));
	if (eh->e_phnum == 0 || eh->e_phnum == PN_XNUM)
		return elf_fail(err, "no usable program headers (e_phnum %u)", eh->e_phnum);
	if (eh->e_phoff > len || (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > len - eh->e_phoff)
		return elf_fail(err, "truncated: program headers at offset %llu (%u of them) "
				     "run past the end of the file (%zu bytes)",
				(unsigned long long)eh->e_phoff, eh->e_phnum, len);
	return 0;
}

static int elf_add_load(const Elf64_Phdr *ph, size_t len, struct elf_info *info,
			char err[ELF_ERR_LEN])
{
	struct elf_load *l;
	uint64_t align = ph->p_align ? ph->p_align : 1;

	if (info->n_loads == ELF_MAX_LOADS)
		return elf_fail(err, "too many PT_LOAD segments (more than %d)", ELF_MAX_LOADS);
	if (ph->p_filesz > ph->p_memsz)
		return elf_fail(err, "a PT_LOAD segment has p_filesz %llu > p_memsz %llu",
				(unsigned long long)ph->p_filesz, (unsigned long long)ph->p_memsz);
	if (ph->p_offset > len || ph->p_filesz > len - ph->p_offset)
		return elf_fail(err, "truncated: segment data at offset %llu + %llu bytes runs "
				     "past the end of the file (%zu bytes)",
				(unsigned long long)ph->p_offset, (unsigned long long)ph->p_filesz,
				len);
	if (ph->p_vaddr >= ELF_VADDR_LIMIT || ph->p_memsz > ELF_VADDR_LIMIT - ph->p_vaddr)
		return elf_fail(err, "a segment at 0x%llx (+%llu) lies outside the user address "
				     "space", (unsigned long long)ph->p_vaddr,
				(unsigned long long)ph->p_memsz);
	if (align & (align - 1))
		return elf_fail(err, "segment alignment %llu is not a power of two",
				(unsigned long long)align);
	if (align > 1 && (ph->p_vaddr % align) != (ph->p_offset % align))
		return elf_fail(err, "segment at 0x%llx is misaligned with its file offset",
				(unsigned long long)ph->p_vaddr);
	l = &info->loads[info->n_loads++];
	l->vaddr = ph->p_vaddr;
	l->offset = ph->p_offset;
	l->filesz = ph->p_filesz;
	l->memsz = ph->p_memsz;
	l->flags = ph->p_flags;
	if (align > info->align)
		info->align = align;
	return 0;
}

static int elf_read_interp(const uint8_t *buf, size_t len, const Elf64_Phdr *ph,
			   struct elf_info *info, char err[ELF_ERR_LEN])
{
	if (ph->p_offset > len || ph->p_filesz > len - ph->p_offset || ph->p_filesz < 2 ||
	    ph->p_filesz > sizeof(info->interp))
		return elf_fail(err, "bad PT_INTERP segment (offset %llu, %llu bytes)",
				(unsigned long long)ph->p_offset, (unsigned long long)ph->p_filesz);
	memcpy(info->interp, buf + ph->p_offset, ph->p_filesz);
	info->interp[ph->p_filesz - 1] = '\0';
	return 0;
}

/* The program headers are visible to the program (AT_PHDR) when a PT_LOAD covers
 * them; find where. */
static uint64_t elf_phdr_vaddr(const Elf64_Ehdr *eh, const struct elf_info *info)
{
	uint64_t size = (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr);

	for (int i = 0; i < info->n_loads; i++) {
		const struct elf_load *l = &info->loads[i];

		if (eh->e_phoff >= l->offset && eh->e_phoff + size <= l->offset + l->filesz)
			return l->vaddr + (eh->e_phoff - l->offset);
	}
	return 0;
}

int elf_parse(const uint8_t *buf, size_t len, struct elf_info *info, char err[ELF_ERR_LEN])
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)(const void *)buf;
	uint64_t phdr_seen = 0;
	int rc;

	memset(info, 0, sizeof(*info));
	err[0] = '\0';
	rc = elf_check_ident(buf, len, err);
	if (rc)
		return rc;
	rc = elf_check_header(eh, len, err);
	if (rc)
		return rc;
	info->align = PAGE_SIZE;
	info->lo = UINT64_MAX;
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		Elf64_Phdr ph;

		memcpy(&ph, buf + eh->e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type == PT_LOAD && ph.p_memsz) {
			rc = elf_add_load(&ph, len, info, err);
			if (rc)
				return rc;
			if (ph.p_vaddr / PAGE_SIZE * PAGE_SIZE < info->lo)
				info->lo = ph.p_vaddr / PAGE_SIZE * PAGE_SIZE;
			if ((ph.p_vaddr + ph.p_memsz + PAGE_SIZE - 1) / PAGE_SIZE * PAGE_SIZE > info->hi)
				info->hi = (ph.p_vaddr + ph.p_memsz + PAGE_SIZE - 1) / PAGE_SIZE *
					   PAGE_SIZE;
		} else if (ph.p_type == PT_INTERP) {
			rc = elf_read_interp(buf, len, &ph, info, err);
			if (rc)
				return rc;
		} else if (ph.p_type == PT_PHDR) {
			phdr_seen = ph.p_vaddr;
		}
	}
	if (info->n_loads == 0)
		return elf_fail(err, "no loadable segments (PT_LOAD)");
	for (int i = 0; i < info->n_loads; i++)
		for (int j = i + 1; j < info->n_loads; j++) {
			const struct elf_load *a = &info->loads[i], *b = &info->loads[j];

			if (a->vaddr < b->vaddr + b->memsz && b->vaddr < a->vaddr + a->memsz)
				return elf_fail(err, "PT_LOAD segments at 0x%llx and 0x%llx overlap",
						(unsigned long long)a->vaddr,
						(unsigned long long)b->vaddr);
		}
	info->is_pie = eh->e_type == ET_DYN;
	info->entry = eh->e_entry;
	if (info->entry < info->lo || info->entry >= info->hi)
		return elf_fail(err, "entry point 0x%llx is outside the loaded segments",
				(unsigned long long)info->entry);
	info->phnum = eh->e_phnum;
	info->phentsize = eh->e_phentsize;
	info->phdr_vaddr = phdr_seen ? phdr_seen : elf_phdr_vaddr(eh, info);
	return 0;
}
