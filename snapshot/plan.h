/*
 * plan.h - hot regions and the writer's order for a snapshot (plan.c).
 */
#ifndef CCVM_PLAN_H
#define CCVM_PLAN_H

#include "engine.h"

/* Pages [*first, *end) of region @r (the last region may be cut short by the end of
 * memory). */
void plan_region_pages(const struct snap_engine *e, uint64_t r, uint64_t *first, uint64_t *end);

/* Regions [*r0, *r1] overlapping chunk @c (several small regions, or part of a large
 * one). */
void plan_chunk_regions(const struct snap_engine *e, uint64_t c, uint64_t *r0, uint64_t *r1);

/* Fill e->hot (ccow: the tracker's classification at req->threshold; every region at
 * threshold 0 without a tracker) and e->order, the chunks in the order the writer
 * saves them: under ccow hot-first, chunks holding hot regions first, then the rest,
 * each group in address order; otherwise address order. */
void plan_snapshot(struct snap_engine *e, const struct snap_request *req);

#endif
