/*
 * imgmem.c - the end-to-end suite's reader of an image's memory: every chunk through
 * ccvm's image reader (frames decompressed, a child over its parents, each chunk
 * checked against its checksum), written to stdout as the guest's RAM, so that the
 * suite can compare it byte for byte with the copy ccvm made at the instant. Comparing
 * the file's own bytes holds only for raw images; VMs compress by default.
 */
#include "../../snapshot/image.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int imgmem_dump(const struct img_reader *r, uint8_t *buf)
{
	for (uint64_t c = 0; c < r->n_chunks; c++) {
		bool has_data;
		int rc;

		memset(buf, 0, IMG_CHUNK);
		rc = img_load_chunk(r, c, buf, &has_data);
		if (rc) {
			fprintf(stderr, "imgmem: chunk %llu: %s\n", (unsigned long long)c,
				rc == -EBADMSG ? "fails its checksum" : strerror(-rc));
			return rc;
		}
		if (fwrite(buf, 1, IMG_CHUNK, stdout) != IMG_CHUNK)
			return -EIO;
	}
	return fflush(stdout) ? -EIO : 0;
}

int main(int argc, char **argv)
{
	struct img_reader r;
	char err[IMG_ERR_LEN];
	uint8_t *buf;
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: imgmem IMAGE > RAM\n");
		return 2;
	}
	if (img_open(argv[1], &r, err)) {
		fprintf(stderr, "imgmem: %s\n", err);
		return 1;
	}
	buf = malloc(IMG_CHUNK);
	rc = buf ? imgmem_dump(&r, buf) : -ENOMEM;
	free(buf);
	img_close(&r);
	return rc ? 1 : 0;
}
