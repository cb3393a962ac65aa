/*
 * ptab.h - the engine's page tables: one entry per guest page (who saves it, its copy,
 * what the snapshot saw of it) and per chunk, and the per-page state machine that
 * decides, once, who saves each page (ptab.c).
 *
 *   PROTECTED --writer staged it-------> SAVED
 *   PROTECTED --copied to the pool----> COPYING --copy[] set--> COPIED --writer--> SAVED
 *                                              COPIED --compressed--> PACKED --writer--> SAVED
 *   PROTECTED --copied, no pool left--> CLAIMED --saved by the copier--> SAVED
 *   ZERO: not present at the snapshot instant; saved as a hole, never copied.
 *   PARENT: an incremental snapshot does not hold it (unwritten since the parent's
 *   instant: the parent's page stands); never copied, never saved.
 *   PACKED: its copy is held compressed (squeeze.c), decided per chunk with the writer.
 *
 * Every transition out of PROTECTED is a compare-and-swap made after the page's bytes
 * were copied somewhere, so exactly one of the writer, the fault handlers and the
 * copier takes a page, the image gets each page once, and a page is never unprotected
 * before its contents at the instant are safe: a page still PROTECTED when taken
 * cannot have been written since the instant (the write would have trapped and taken
 * it first), so bytes copied before the take are the instant's.
 */
#ifndef CCVM_PTAB_H
#define CCVM_PTAB_H

#include "../mmu/gmem.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum page_state { PS_PROTECTED = 0, PS_CLAIMED, PS_COPIED, PS_SAVED, PS_ZERO, PS_COPYING,
		  PS_PARENT, PS_PACKED };

static inline bool ps_take(uint8_t *st, enum page_state to)
{
	uint8_t expect = PS_PROTECTED;

	return __atomic_compare_exchange_n(st, &expect, (uint8_t)to, false, __ATOMIC_ACQ_REL,
					   __ATOMIC_ACQUIRE);
}

static inline enum page_state ps_get(const uint8_t *st)
{
	return (enum page_state)__atomic_load_n(st, __ATOMIC_ACQUIRE);
}

static inline void ps_set(uint8_t *st, enum page_state s)
{
	__atomic_store_n(st, (uint8_t)s, __ATOMIC_RELEASE);
}

/*
 * The tables. No lock: an entry of state[] changes only by ps_take (a compare-and-swap
 * out of PROTECTED) or by the one thread that took the page; copy[] and pre[] of a
 * page belong to whoever took it; the per-chunk tables to the writer.
 */
struct snap_ptab {
	uint64_t pages, chunks;
	uint8_t *tables;          /* the per-page tables below, one mapping */
	size_t tables_len;
	uint8_t *state;           /* enum page_state */
	void **copy;              /* COPIED pages: their pool buffer */
	uint8_t *pre;             /* copied as part of a hot region */
	uint64_t *pre_hash;       /* their contents' hash, to tell at the end if written */
	uint8_t *faulted;         /* the guest wrote it before the writer saved it */
	/* Write tracking for incremental snapshots (track.c): every page is
	 * write-protected or marked dirty. */
	uint8_t *dirty;           /* written since the last instant */
	uint8_t *dirty_instant;   /* what the running snapshot took as written */
	uint8_t *was_present;     /* present at the last instant */
	uint8_t *split;           /* per chunk: a page-sized unprotect split its huge page */
	uint64_t *chunk_saved_at; /* per chunk: the guest's progress when the writer saved it */
};

/* Tables for @size bytes of memory: 0 or -ENOMEM. */
int ptab_init(struct snap_ptab *t, uint64_t size);
void ptab_fini(struct snap_ptab *t);

/* In the pause: every page PS_ZERO but those holding data in @host (present or swapped
 * out), which are PS_PROTECTED: those the snapshot must save. */
int ptab_mark(struct snap_ptab *t, uint8_t *host);

/* Put back together the huge pages of @mem that single-page unprotects split. */
void ptab_collapse_split(struct snap_ptab *t, struct gmem *mem);

#endif
