/*
 * plan.h - what a snapshot does first: which regions are hot at its instant, and the
 * order in which the writer saves chunks (plan.c).
 */
#ifndef CCVM_PLAN_H
#define CCVM_PLAN_H

#include "request.h"
#include "../mmu/tracker.h"

#include <stdint.h>

/*
 * The plan of the running snapshot. Made while the writers of memory are paused (and
 * once before, to size the pool), read by every other stage afterwards: no lock.
 */
struct snap_plan {
	uint64_t size, region_size;
	uint64_t n_regions;   /* the last one may be cut short by the end of memory */
	uint64_t chunks;
	uint8_t *hot;         /* per region: hot at the instant */
	uint8_t *eager;       /* per region: copied during the pause, never protected */
	uint64_t *order;      /* chunks in the order the writer saves them */
	uint64_t regions_hot;
	uint32_t *hot_pages;  /* pages written recently, hottest first (mmu/heat.h) */
	uint64_t n_hot_pages;
};

/* A plan for @size bytes of memory in regions of @region_size: 0 or -ENOMEM. */
int plan_init(struct snap_plan *pl, uint64_t size, uint64_t region_size);
void plan_fini(struct snap_plan *pl);

/* Pages [*first, *end) of region @r (the last region may be cut short by the end of
 * memory). */
void plan_region_pages(const struct snap_plan *pl, uint64_t r, uint64_t *first, uint64_t *end);

/* Regions [*r0, *r1] overlapping chunk @c (several small regions, or part of a large
 * one). */
void plan_chunk_regions(const struct snap_plan *pl, uint64_t c, uint64_t *r0, uint64_t *r1);

/* Fill hot (ccow: @tracker's classification at @threshold; every region at threshold 0
 * without a tracker; none otherwise), regions_hot and order: under ccow hot-first,
 * chunks holding hot regions first, then the rest, each group in address order;
 * otherwise address order. No region is eager yet. */
void plan_make(struct snap_plan *pl, struct tracker *tracker, enum snap_policy policy,
	       double threshold, enum snap_order order);

/* The pages the tracker ranks hot, hottest first, at most @max (none without a
 * tracker): those a snapshot copies first while paused (--precopy eager). */
void plan_hot_pages(struct snap_plan *pl, struct tracker *tracker, uint64_t max);

#endif
