/*
 * fuzz_shm.c - libFuzzer target: an image's shared-memory section (vmm/linux/shm.c),
 * any bytes. The check runs first (lx_shm_check); what passes is made into memfds
 * (lx_shm_restore), each looked up once by the inode its record names, and closed.
 */
#include "../../vmm/linux/lx.h"
#include "../../vmm/base/log.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *reg = NULL;
	char err[256];
	const char *key;
	json_t *v;

	log_set_level(LOG_ERR);
	if (lx_shm_check(data, size, err, sizeof(err)) || lx_shm_restore(data, size, &reg))
		return 0;
	json_object_foreach(reg, key, v) {
		int fd = lx_shm_restored(reg, strtoull(key, NULL, 10));

		if (fd < 0)
			abort(); /* every record checked in is found again */
		close(fd);
	}
	lx_shm_restored_close(reg);
	return 0;
}
