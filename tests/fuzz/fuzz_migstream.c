/*
 * fuzz_migstream.c - libFuzzer target: a live-migration stream (snapshot/migstream.c),
 * any bytes, read as a destination reads it into 16 MiB of memory until its end or
 * its first refused frame (post-copy's switch frame included); then the same bytes
 * read as the source reads the destination's answers and page requests.
 */
#include "../../snapshot/migstream.h"
#include "../../base/log.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define FUZZ_RAM (16ULL << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *mem;
	static uint64_t have[FUZZ_RAM / 4096 / 64];
	char why[MIG_WHY_MAX];
	enum mig_ack_code code;
	struct mig_event ev;
	uint64_t gpa;
	struct mig_in in;
	char err[256];
	int fd = memfd_create("fuzz-migstream", MFD_CLOEXEC), rc;

	log_set_level(LOG_ERR);
	if (!mem && !(mem = malloc(FUZZ_RAM)))
		abort();
	if (fd < 0 || write(fd, data, size) != (ssize_t)size || lseek(fd, 0, SEEK_SET) != 0)
		abort();
	rc = mig_in_open(&in, fd, mem, FUZZ_RAM, NULL, err, sizeof(err));
	in.have = have;
	while (!rc) {
		rc = mig_next(&in, &ev, err, sizeof(err));
		free(ev.data);
		if (!rc && ev.type == MIG_END)
			break;
	}
	mig_in_close(&in);
	if (lseek(fd, 0, SEEK_SET) != 0)
		abort();
	while (mig_read_msg(fd, FUZZ_RAM, &code, &gpa, why) == 0)
		if (code == MIG_ACK_PAGE && (gpa % MIG_BLOCK || gpa >= FUZZ_RAM))
			abort(); /* a request outside the RAM must never come through */
	close(fd);
	return 0;
}
