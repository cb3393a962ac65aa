/*
 * lazy.h - lazy restore: guest memory filled from the image on first touch.
 */
#ifndef CCVM_LAZY_H
#define CCVM_LAZY_H

#include "image.h"

#include <stdint.h>

struct vm;
struct lazy;

/*
 * lazy_start - take over @r (the open, validated image) and serve guest RAM from it:
 * a missing page faults into a handler that loads and verifies its 2 MiB chunk; a
 * prefetch thread loads every chunk in order meanwhile. Chunk 0 (the system area) is
 * loaded before this returns. Returns 0 or -errno.
 */
int lazy_start(struct img_reader *r, struct vm *vm, const char *file, struct lazy **out);

/* Wait until every chunk is loaded, stop serving faults, free. Returns 0, or -EBADMSG
 * when a chunk failed its checksum (the VM was stopped then). */
int lazy_finish(struct lazy *l);

/* Stop loading early (the VM is going away); lazy_finish then returns soon. */
void lazy_abort(struct lazy *l);

#endif
