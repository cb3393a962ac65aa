/*
 * fuzz_migstream.c - libFuzzer target: a live-migration stream (snapshot/migstream.c),
 * any bytes, read as a destination reads it into 16 MiB of memory until its end or
 * its first refused frame.
 */
#include "../../snapshot/migstream.h"
#include "../../vmm/base/log.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define FUZZ_RAM (16ULL << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *mem;
	struct mig_event ev;
	struct mig_in in;
	char err[256];
	int fd = memfd_create("fuzz-migstream", MFD_CLOEXEC), rc;

	log_set_level(LOG_ERR);
	if (!mem && !(mem = malloc(FUZZ_RAM)))
		abort();
	if (fd < 0 || write(fd, data, size) != (ssize_t)size || lseek(fd, 0, SEEK_SET) != 0)
		abort();
	rc = mig_in_open(&in, fd, mem, FUZZ_RAM, NULL, err, sizeof(err));
	while (!rc) {
		rc = mig_next(&in, &ev, err, sizeof(err));
		free(ev.data);
		if (!rc && ev.type == MIG_END)
			break;
	}
	mig_in_close(&in);
	close(fd);
	return 0;
}
