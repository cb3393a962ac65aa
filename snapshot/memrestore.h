/*
 * memrestore.h - an image's memory put back into a memory range, all of it now.
 * (lazy.h puts it back on first touch instead.)
 */
#ifndef CCVM_MEMRESTORE_H
#define CCVM_MEMRESTORE_H

#include "image.h"
#include "../mmu/gmem.h"

/*
 * memrestore_eager - read every chunk of @r (the open image at @file) into @mem, each
 * checked against its checksum; holes are skipped, so their memory stays unallocated
 * (and reads as zero in a fresh mapping). @mem must be at least the image's RAM size.
 * Errors are reported to the user. Returns 0, -EINVAL when @mem is too small,
 * -EBADMSG for a damaged chunk, or -errno.
 */
int memrestore_eager(const char *file, struct img_reader *r, struct gmem *mem);

#endif
