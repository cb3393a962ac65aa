/*
 * plan.c - what a snapshot does first: which regions are hot at its instant, and the
 * order in which the writer saves memory. Pure functions of the engine's geometry, the
 * tracker's classification and the request; the CoW core (engine.c) follows the plan.
 */
#include "plan.h"

#include <string.h>

/* Pages [*first, *end) of region @r (the last region may be cut short by the end of RAM). */
void plan_region_pages(const struct snap_engine *e, uint64_t r, uint64_t *first, uint64_t *end)
{
	uint64_t per = e->region_size / PAGE_SIZE;

	*first = r * per;
	*end = *first + per < e->size / PAGE_SIZE ? *first + per : e->size / PAGE_SIZE;
}

/* Regions [*r0, *r1] overlapping chunk @c (several small regions, or part of a large one). */
void plan_chunk_regions(const struct snap_engine *e, uint64_t c, uint64_t *r0, uint64_t *r1)
{
	*r0 = c * IMG_CHUNK / e->region_size;
	*r1 = ((c + 1) * IMG_CHUNK - 1) / e->region_size;
	if (*r1 >= e->n_regions)
		*r1 = e->n_regions - 1;
}

/* Which regions are hot now, and the writer's chunk order: chunks holding hot regions
 * first (they are the likeliest to be written soon: saved before the guest gets there,
 * they cost no copy at all), then the rest, each group in address order. */
void plan_snapshot(struct snap_engine *e, const struct snap_request *req)
{
	uint64_t chunks = e->size / IMG_CHUNK, n = 0;

	memset(e->hot, 0, e->n_regions);
	if (req->policy == SNAP_CCOW) {
		if (e->tracker)
			e->cur.regions_hot = tracker_classify(e->tracker, req->threshold, e->hot);
		else if (req->threshold <= 0)
			e->cur.regions_hot = e->n_regions, memset(e->hot, 1, e->n_regions);
	}
	if (req->policy != SNAP_CCOW || req->order == SNAP_LINEAR) {
		for (uint64_t c = 0; c < chunks; c++)
			e->order[c] = c;
		return;
	}
	for (int pass = 0; pass < 2; pass++)
		for (uint64_t c = 0; c < chunks; c++) {
			uint64_t r0, r1;
			bool hot = false;

			plan_chunk_regions(e, c, &r0, &r1);
			for (uint64_t r = r0; r <= r1; r++)
				hot = hot || e->hot[r];
			if (hot == (pass == 0))
				e->order[n++] = c;
		}
}

