/*
 * fuzz_elf.c - libFuzzer target: the ELF loader's parser (vmm/linux/elf.c) on any
 * file a user names as the program or a program names as its interpreter.
 */
#include "../../vmm/linux/elf.h"
#include "../../base/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct elf_info info;
	char err[ELF_ERR_LEN];

	log_set_level(LOG_ERR);
	(void)elf_parse(data, size, &info, err);
	return 0;
}
