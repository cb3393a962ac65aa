/*
 * aspace_impl.h - what the address spaces' two files share (aspace.c, aspace_hold.c):
 * the block arithmetic of a set and the steps on one block, each called with the
 * set's lock held as aspace.c's are.
 */
#ifndef CCVM_ASPACE_IMPL_H
#define CCVM_ASPACE_IMPL_H

#include "aspace.h"
#include "layout.h"
#include "pagetable.h"

#define ASPACE_USER_BLOCK (LAYOUT_USER_BASE / HUGE_SIZE) /* the first user block */
#define ASPACE_POOL LAYOUT_PGTABLE_PAGES                 /* page-table pages per window */
#define ASPACE_HALF (ASPACE_POOL / 2) /* one half of each pool in use, the other forgotten */

/* Block @b of window @w: its guest-physical address, its readers' count, whether a
 * snapshot holds it, whether it may hold bytes (is charged). */
static inline uint64_t as_gpa(const struct aspace_set *s, int w, uint32_t b)
{
	return (uint64_t)w * s->window + (uint64_t)b * HUGE_SIZE;
}

static inline uint16_t *as_readers(const struct aspace_set *s, int w, uint32_t b)
{
	return &s->readers[(size_t)w * s->blocks + b];
}

static inline bool as_held(const struct aspace_set *s, int w, uint32_t b)
{
	return s->held[(size_t)w * s->blocks + b];
}

static inline bool as_backed(const struct aspace_set *s, int w, uint32_t b)
{
	return s->backed[(size_t)w * s->blocks + b];
}

/* The first pool page of the half of every window's pool in use. */
static inline uint32_t as_half_start(const struct aspace_set *s)
{
	return (uint32_t)s->half * ASPACE_HALF;
}

/* aspace.c, the set's lock held: block @b of window @w charged from now on; may @need
 * more blocks be charged; block @b of window @w no longer a snapshot's (saved first);
 * @as's entry for block @b set from its state; @as's fresh tables written out (0, or
 * -ENOSPC), and every space's, the vCPUs whose CR3 moved flushed. */
void as_back(struct aspace_set *s, int w, uint32_t b);
bool as_fits(const struct aspace_set *s, uint64_t need);
void as_unhold(struct aspace_set *s, int w, uint32_t b);
void as_put(struct aspace *as, uint32_t b);
int as_commit(struct aspace *as, uint64_t *flush);
void as_commit_all(struct aspace_set *s, uint64_t *flush);
/* A new space in window @w (-1: a free one), every block zero and its own (@eager:
 * charged and mapped now); 0 or -errno (the set's lock held). */
int as_new_at(struct aspace_set *s, int w, bool eager, struct aspace **out);

#endif
