/*
 * memrestore.c - eager restore of an image's memory (see memrestore.h).
 *
 * Knows images and memory, not VMs: restore.c calls it for a VM's RAM, and the unit
 * tests for plain memory snapshotted under host threads.
 */
#include "memrestore.h"
#include "../vmm/log.h"

#include <errno.h>
#include <string.h>

int memrestore_eager(const char *file, struct img_reader *r, struct gmem *mem)
{
	if (r->n_chunks * IMG_CHUNK > mem->size) {
		log_err("cannot restore '%s': it holds %llu MiB of memory, more than the %llu MiB "
			"given", file, (unsigned long long)(r->n_chunks * IMG_CHUNK >> 20),
			(unsigned long long)(mem->size >> 20));
		return -EINVAL;
	}
	for (uint64_t c = 0; c < r->n_chunks; c++) {
		bool data;
		int rc = img_load_chunk(r, c, mem->host + c * IMG_CHUNK, &data);

		if (rc) {
			log_err("cannot restore '%s': memory chunk %llu (guest %#llx-%#llx) %s; "
				"use an older snapshot, or 'ccvm inspect %s' to list every damaged "
				"chunk", file, (unsigned long long)c,
				(unsigned long long)(c * IMG_CHUNK),
				(unsigned long long)((c + 1) * IMG_CHUNK), rc == -EBADMSG ?
				"fails its checksum: the image is damaged" : strerror(-rc), file);
			return rc;
		}
	}
	return 0;
}
