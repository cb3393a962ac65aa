/*
 * pool.h - the copy buffers a snapshot engine owns: region-sized slots, faulted in off
 * the fault path and kept between snapshots.
 */
#ifndef CCVM_POOL_H
#define CCVM_POOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct pool {
	uint8_t *base;
	size_t slot_size;        /* a CCoW region; single pages are carved from slots */
	size_t n_slots;          /* the reservation (address space only) */
	size_t limit;            /* slots it may grow to (pool_set_limit), at most n_slots */
	size_t ready;            /* slots [0, ready) are resident: only they are handed out */
	uint32_t *free_slots;    /* stack of free ready slots */
	size_t n_free_slots;
	uint8_t *kind;           /* per slot: POOL_SLOT_* */
	uint32_t *left;          /* per region slot: its pages still held */
	uint32_t *free_pages;    /* stack of free pages of page slots */
	size_t n_free_pages;
	size_t in_use, in_use_peak; /* bytes */
	/* Bytes of guest pages the pool holds copies of, compressed ones counted at their
	 * raw size (arena slots hold compressed copies: they count in in_use only). */
	size_t raw, raw_peak;
	pthread_mutex_t lock;    /* the stacks and counters */
	pthread_mutex_t grow_lock; /* one grower or releaser at a time */
};

/* Reserve @bytes of address space (huge-page backed where the host allows) in slots
 * of @slot_size (a power of two, at least a page). Nothing is resident yet. Returns 0
 * or -errno (-EINVAL: less than one slot). */
int pool_init(struct pool *p, size_t bytes, size_t slot_size);
void pool_fini(struct pool *p);

/* At most @slots slots (and never more than the reservation) may be ready from now
 * on: a cap on the memory the pool takes. Slots ready beyond it are given back now if
 * nothing is in use, else by the next pool_shrink. */
void pool_set_limit(struct pool *p, size_t slots);
/* The limit, in slots and in 4 KiB pages. */
size_t pool_limit(const struct pool *p);
uint64_t pool_cap_pages(const struct pool *p);

/* Fault in slots until @slots are ready (at most the limit). Slow (first
 * touches): never call it on a fault path. Returns 0 or -errno. */
int pool_grow(struct pool *p, size_t slots);
/* When nothing is in use: give back all but the first @slots ready slots. */
void pool_shrink(struct pool *p, size_t slots);
/* When nothing is in use: every ready slot free again, page slots included. */
void pool_reset(struct pool *p);

/* A 4 KiB buffer, or NULL when no ready memory is left. */
void *pool_get_page(struct pool *p);
/* A whole slot for a region copy, or NULL unless more than @reserve slots are free
 * (they stay for single pages). Its pages go back one by one with pool_put; pages of
 * it never used go back with pool_unused. */
void *pool_get_slot(struct pool *p, size_t reserve);
void pool_unused(struct pool *p, void *slot, size_t pages);
/* Give back one page, from a page slot or a region slot. */
void pool_put(struct pool *p, void *page);

/* Arenas: slots that hold compressed copies (snapshot/squeeze.c). A whole slot, or
 * NULL unless more than @reserve slots are free; its pages go back with
 * pool_arena_back (any address inside it names it). */
void *pool_get_arena(struct pool *p, size_t reserve);
void pool_arena_back(struct pool *p, void *arena, size_t pages);
/* The region slot that holds @page, when exactly @n of its pages are held; else NULL. */
void *pool_region_of(struct pool *p, const void *page, size_t n);
/* Region slot @slot, whose copies are no longer needed (a pack made of them is
 * written over them), becomes an arena of which @keep pages are taken (the rest of a
 * slot's pages were given back before, or come back with pool_arena_back). */
void pool_region_to_arena(struct pool *p, void *slot, size_t keep);
/* @pages of raw copies now held compressed (positive) or no longer (negative): the
 * raw count stays what the pool holds copies of. */
void pool_count_packed(struct pool *p, long pages);

size_t pool_in_use(struct pool *p);       /* bytes */
size_t pool_ready_bytes(struct pool *p);  /* the pool's size now */
size_t pool_free_slots(struct pool *p);
size_t pool_free_pages(struct pool *p);   /* pages handed out as single buffers next */
/* Bytes of the pool resident in host memory (mincore). */
size_t pool_resident_bytes(struct pool *p);
/* Most bytes in use at once since the last call; resets the mark. */
size_t pool_take_peak(struct pool *p);
/* Raw bytes of the copies held now, and the most at once since the last call (which
 * resets the mark). */
size_t pool_raw(struct pool *p);
size_t pool_take_raw_peak(struct pool *p);

#endif
