/*
 * test_elf.c - ELF validation: good executables load, every kind of bad file is
 * refused with a message that names the problem.
 */
#include "suites.h"
#include "../../vmm/linux/elf.h"

#include <elf.h>
#include <errno.h>
#include <string.h>

#define IMG_SIZE 0x3000

struct img {
	uint8_t b[IMG_SIZE];
};

/* A small static executable: header, two program headers (PT_LOAD text at 0x400000
 * covering the headers, PT_LOAD data), entry inside the text. */
static void img_make(struct img *im, int type)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)im->b;
	Elf64_Phdr *ph = (Elf64_Phdr *)(im->b + sizeof(*eh));

	memset(im, 0, sizeof(*im));
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = (Elf64_Half)type;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_entry = 0x400100;
	eh->e_phoff = sizeof(*eh);
	eh->e_phentsize = sizeof(Elf64_Phdr);
	eh->e_phnum = 2;
	eh->e_ehsize = sizeof(*eh);
	ph[0] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_flags = PF_R | PF_X, .p_offset = 0,
			      .p_vaddr = 0x400000, .p_filesz = 0x1000, .p_memsz = 0x1000,
			      .p_align = 0x1000 };
	ph[1] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_flags = PF_R | PF_W, .p_offset = 0x1000,
			      .p_vaddr = 0x401000, .p_filesz = 0x800, .p_memsz = 0x5000,
			      .p_align = 0x1000 };
}

static Elf64_Ehdr *eh_of(struct img *im)
{
	return (Elf64_Ehdr *)im->b;
}

static Elf64_Phdr *ph_of(struct img *im, int i)
{
	return (Elf64_Phdr *)(im->b + sizeof(Elf64_Ehdr)) + i;
}

static void expect_refused(const uint8_t *buf, size_t len, const char *needle)
{
	struct elf_info info;
	char err[ELF_ERR_LEN];
	int rc = elf_parse(buf, len, &info, err);

	ck_assert_msg(rc == -ENOEXEC, "expected -ENOEXEC, got %d", rc);
	ck_assert_msg(strstr(err, needle) != NULL, "message '%s' should mention '%s'", err, needle);
}

/* A well-formed static executable parses with the right extent, entry and phdr. */
START_TEST(test_good_exec)
{
	struct img im;
	struct elf_info info;
	char err[ELF_ERR_LEN];

	img_make(&im, ET_EXEC);
	ck_assert_int_eq(elf_parse(im.b, sizeof(im.b), &info, err), 0);
	ck_assert_int_eq(info.n_loads, 2);
	ck_assert_int_eq(info.is_pie, 0);
	ck_assert_uint_eq(info.entry, 0x400100);
	ck_assert_uint_eq(info.lo, 0x400000);
	ck_assert_uint_eq(info.hi, 0x406000);
	ck_assert_uint_eq(info.phdr_vaddr, 0x400040);
	ck_assert_str_eq(info.interp, "");
}
END_TEST

/* ET_DYN without PT_INTERP is a static-PIE: accepted, flagged as PIE. */
START_TEST(test_static_pie)
{
	struct img im;
	struct elf_info info;
	char err[ELF_ERR_LEN];

	img_make(&im, ET_DYN);
	ck_assert_int_eq(elf_parse(im.b, sizeof(im.b), &info, err), 0);
	ck_assert_int_eq(info.is_pie, 1);
}
END_TEST

/* A dynamic executable parses, and its interpreter is reported for the loader to refuse. */
START_TEST(test_interp_reported)
{
	struct img im;
	struct elf_info info;
	char err[ELF_ERR_LEN];
	const char *interp = "/lib64/ld-linux-x86-64.so.2";

	img_make(&im, ET_EXEC);
	eh_of(&im)->e_phnum = 3;
	*ph_of(&im, 2) = (Elf64_Phdr){ .p_type = PT_INTERP, .p_offset = 0x200,
				       .p_filesz = strlen(interp) + 1 };
	strcpy((char *)im.b + 0x200, interp);
	ck_assert_int_eq(elf_parse(im.b, sizeof(im.b), &info, err), 0);
	ck_assert_str_eq(info.interp, interp);
}
END_TEST

/* Files that are not ELF at all: empty, a script, random bytes. */
START_TEST(test_not_elf)
{
	const uint8_t script[] = "#!/bin/sh\necho hi\n";
	const uint8_t junk[64] = { 1, 2, 3, 4 };

	expect_refused((const uint8_t *)"", 0, "not an ELF");
	expect_refused(script, sizeof(script), "script");
	expect_refused(junk, sizeof(junk), "not an ELF");
}
END_TEST

/* 32-bit and big-endian ELF files are refused by name. */
START_TEST(test_wrong_class)
{
	struct img im;

	img_make(&im, ET_EXEC);
	im.b[EI_CLASS] = ELFCLASS32;
	expect_refused(im.b, sizeof(im.b), "32-bit");
	img_make(&im, ET_EXEC);
	im.b[EI_DATA] = ELFDATA2MSB;
	expect_refused(im.b, sizeof(im.b), "big-endian");
	img_make(&im, ET_EXEC);
	eh_of(&im)->e_machine = EM_AARCH64;
	expect_refused(im.b, sizeof(im.b), "another machine");
	img_make(&im, ET_REL);
	expect_refused(im.b, sizeof(im.b), "object file");
}
END_TEST

/* Truncation anywhere: in the header, in the program headers, in segment data. */
START_TEST(test_truncated)
{
	struct img im;

	img_make(&im, ET_EXEC);
	expect_refused(im.b, 40, "truncated");
	expect_refused(im.b, sizeof(Elf64_Ehdr) + 10, "truncated");
	expect_refused(im.b, 0x1400, "truncated");
}
END_TEST

/* Inconsistent segments: filesz > memsz, overlap, entry outside, bad alignment,
 * an address past the user half, and huge phnum. */
START_TEST(test_bad_segments)
{
	struct img im;

	img_make(&im, ET_EXEC);
	ph_of(&im, 1)->p_filesz = 0x6000;
	expect_refused(im.b, sizeof(im.b), "p_filesz");
	img_make(&im, ET_EXEC);
	ph_of(&im, 1)->p_vaddr = 0x400800;
	ph_of(&im, 1)->p_offset = 0x800;
	expect_refused(im.b, sizeof(im.b), "overlap");
	img_make(&im, ET_EXEC);
	eh_of(&im)->e_entry = 0x10;
	expect_refused(im.b, sizeof(im.b), "entry point");
	img_make(&im, ET_EXEC);
	ph_of(&im, 1)->p_align = 3000;
	expect_refused(im.b, sizeof(im.b), "power of two");
	img_make(&im, ET_EXEC);
	ph_of(&im, 1)->p_vaddr = 0xffff800000000000ULL;
	expect_refused(im.b, sizeof(im.b), "outside the user address space");
	img_make(&im, ET_EXEC);
	eh_of(&im)->e_phnum = 60000;
	expect_refused(im.b, sizeof(im.b), "truncated");
	img_make(&im, ET_EXEC);
	eh_of(&im)->e_phnum = 0;
	expect_refused(im.b, sizeof(im.b), "program headers");
}
END_TEST

/* An overflowing offset + size must not wrap around the bounds check. */
START_TEST(test_offset_overflow)
{
	struct img im;

	img_make(&im, ET_EXEC);
	ph_of(&im, 1)->p_offset = UINT64_MAX - 0x10;
	expect_refused(im.b, sizeof(im.b), "truncated");
	img_make(&im, ET_EXEC);
	eh_of(&im)->e_phoff = UINT64_MAX - 8;
	expect_refused(im.b, sizeof(im.b), "truncated");
}
END_TEST

Suite *elf_suite(void)
{
	Suite *s = suite_create("elf");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, test_good_exec);
	tcase_add_test(tc, test_static_pie);
	tcase_add_test(tc, test_interp_reported);
	tcase_add_test(tc, test_not_elf);
	tcase_add_test(tc, test_wrong_class);
	tcase_add_test(tc, test_truncated);
	tcase_add_test(tc, test_bad_segments);
	tcase_add_test(tc, test_offset_overflow);
	suite_add_tcase(s, tc);
	return s;
}
