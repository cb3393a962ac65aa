/*
 * lazy.h - lazy restore: guest memory filled from the image on first touch.
 */
#ifndef CCVM_LAZY_H
#define CCVM_LAZY_H

#include "image.h"
#include "../mmu/gmem.h"

#include <stdint.h>

struct lazy;

/* Where the memory goes, and whom to tell when a chunk turns out damaged (the VM is
 * stopped then; NULL: nobody). */
struct lazy_target {
	struct gmem *mem;
	void (*on_bad)(void *ctx);
	void *ctx;
};

/*
 * lazy_start - take over @r (the open, validated image) and serve @t's memory from it:
 * a missing page faults into a handler that loads and verifies its 2 MiB chunk; a
 * prefetch thread loads every chunk in order meanwhile. Chunk 0 (the system area) is
 * loaded before this returns. Returns 0 or -errno.
 */
int lazy_start(struct img_reader *r, const struct lazy_target *t, const char *file,
	       struct lazy **out);

/* Wait until every chunk is loaded, stop serving faults, free. Returns 0, or -EBADMSG
 * when a chunk failed its checksum (on_bad was called then). */
int lazy_finish(struct lazy *l);

/* Stop loading early (the VM is going away); lazy_finish then returns soon. */
void lazy_abort(struct lazy *l);

#endif
