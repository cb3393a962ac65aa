/*
 * fuzz_image.c - libFuzzer target: the snapshot image reader (snapshot/image.c) on
 * any file. The input is the whole file (a memfd, opened by path as `ccvm inspect`
 * does); whatever opens is then read as restore reads it: every section, and the
 * first memory chunks.
 */
#include "../../snapshot/image.h"
#include "../../base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define FUZZ_CHUNKS 4 /* memory chunks read per input: enough to reach every check */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_read_all(const struct img_reader *r)
{
	static uint8_t chunk[IMG_CHUNK];
	bool has_data;

	for (uint32_t t = 0; t < 64; t++) {
		const struct img_section *s = img_find(r, t);
		void *buf = NULL;

		if (s && img_read_section(r, s, &buf) == 0)
			free(buf);
	}
	for (uint64_t c = 0; c < r->n_chunks && c < FUZZ_CHUNKS; c++)
		(void)img_load_chunk(r, c, chunk, &has_data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], err[IMG_ERR_LEN];
	struct img_reader r;
	int fd = memfd_create("fuzz-image", MFD_CLOEXEC);

	log_set_level(LOG_ERR);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (img_open(path, &r, err) == 0) {
		fuzz_read_all(&r);
		img_close(&r);
	}
	close(fd);
	return 0;
}
