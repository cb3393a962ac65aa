/*
 * fuzz_shm.c - libFuzzer target: an image's shared-memory section (vmm/linux/shm.c),
 * any bytes. The check runs first (lx_shm_check); what passes is made into memfds
 * (lx_shm_restore), each looked up once by the inode its record names, and closed.
 * The same bytes also arrive in three pieces as a migration brings them (lx_shm_in_*),
 * which must take what the check took, with the same memfds.
 */
#include "../../vmm/linux/lx.h"
#include "../../base/log.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* @data in three pieces through lx_shm_in: 0 and its registry, or an error. */
static int fuzz_pieces(const uint8_t *data, size_t size, json_t **reg)
{
	struct lx_shm_in in;
	size_t a = size / 3, b = size - size / 5;
	char err[256];
	int rc;

	lx_shm_in_init(&in, size);
	rc = lx_shm_in_put(&in, data, a, err, sizeof(err));
	if (!rc)
		rc = lx_shm_in_put(&in, data + a, b - a, err, sizeof(err));
	if (!rc)
		rc = lx_shm_in_put(&in, data + b, size - b, err, sizeof(err));
	if (!rc)
		rc = lx_shm_in_end(&in, reg, err, sizeof(err));
	lx_shm_in_free(&in);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *reg = NULL, *pieces = NULL;
	char err[256];
	const char *key;
	json_t *v;
	int whole, in_pieces;

	log_set_level(LOG_ERR);
	whole = lx_shm_check(data, size, err, sizeof(err)) || lx_shm_restore(data, size, &reg);
	in_pieces = fuzz_pieces(data, size, &pieces);
	if (!whole != !in_pieces)
		abort(); /* the two readers disagree on what a section is */
	if (whole) {
		lx_shm_restored_close(pieces);
		return 0;
	}
	json_object_foreach(reg, key, v) {
		int fd = lx_shm_restored(reg, strtoull(key, NULL, 10));

		if (fd < 0 || !pieces || !json_object_get(pieces, key))
			abort(); /* every record checked in is found again, both ways */
		close(fd);
	}
	if (json_object_size(reg) != (pieces ? json_object_size(pieces) : 0))
		abort();
	lx_shm_restored_close(reg);
	lx_shm_restored_close(pieces);
	return 0;
}
