/*
 * cow_impl.h - what the copy-on-write data path (cow.c) shares with its pause copy
 * (cow_pause.c) and its tests. Nothing else looks inside.
 */
#ifndef CCVM_COW_IMPL_H
#define CCVM_COW_IMPL_H

#include "cow.h"

/* Region copies leave this share of the ready pool to single pages: without a buffer
 * a fault must save its page to the image while the guest waits. */
#define POOL_RESERVE_DIV 8
#define POOL_MIN_RESERVE (16ULL << 20)  /* bytes kept for single pages at least */
#define EAGER_CLOCK_EVERY 32            /* pause copies between two looks at the clock */
#define EAGER_RATE_MIN 256              /* pages copied before their rate is trusted */
/* A page copied in the pause and unprotected, until measured: 4 us (a copy into ready
 * memory, ~1 us, and a call that splits a host huge page, ~3 us, on plain memory). */
#define EAGER_PAGE_NS_DEFAULT 4000

/* Any page of [first, end) still protected? */
bool cow_region_protected(const struct snap_cow *c, uint64_t first, uint64_t end);

/*
 * Copy every page of region @r still protected into one slot and, unless @armed is
 * false (the pause, before protection), lift the protection of the whole region in
 * one call (a 2 MiB region stays one huge page on the host). False when nothing was
 * left to copy or the pool has no slot to spare.
 */
bool cow_copy_region(struct snap_cow *c, uint64_t r, bool background, bool armed);

#endif
