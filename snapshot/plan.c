/*
 * plan.c - what a snapshot does first: which regions are hot at its instant, and the
 * order in which the writer saves memory. Pure functions of the geometry, the
 * tracker's classification and the request; the other stages follow the plan.
 */
#include "plan.h"
#include "../base/pages.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_CHUNK HUGE_SIZE /* the image's chunk (IMG_CHUNK) */

int plan_init(struct snap_plan *pl, uint64_t size, uint64_t region_size)
{
	memset(pl, 0, sizeof(*pl));
	pl->size = size;
	pl->region_size = region_size;
	pl->n_regions = (size + region_size - 1) / region_size;
	pl->chunks = size / PLAN_CHUNK;
	pl->hot = calloc(pl->n_regions ? pl->n_regions : 1, 1);
	pl->eager = calloc(pl->n_regions ? pl->n_regions : 1, 1);
	pl->order = calloc(pl->chunks ? pl->chunks : 1, sizeof(uint64_t));
	pl->hot_pages = calloc(size / PAGE_SIZE ? size / PAGE_SIZE : 1, sizeof(uint32_t));
	return pl->hot && pl->eager && pl->order && pl->hot_pages ? 0 : -ENOMEM;
}

void plan_fini(struct snap_plan *pl)
{
	free(pl->hot);
	free(pl->eager);
	free(pl->order);
	free(pl->hot_pages);
	pl->hot = pl->eager = NULL;
	pl->order = NULL;
	pl->hot_pages = NULL;
}

void plan_region_pages(const struct snap_plan *pl, uint64_t r, uint64_t *first, uint64_t *end)
{
	uint64_t per = pl->region_size / PAGE_SIZE;

	*first = r * per;
	*end = *first + per < pl->size / PAGE_SIZE ? *first + per : pl->size / PAGE_SIZE;
}

void plan_chunk_regions(const struct snap_plan *pl, uint64_t c, uint64_t *r0, uint64_t *r1)
{
	*r0 = c * PLAN_CHUNK / pl->region_size;
	*r1 = ((c + 1) * PLAN_CHUNK - 1) / pl->region_size;
	if (*r1 >= pl->n_regions)
		*r1 = pl->n_regions - 1;
}

/* Chunks holding hot regions first (they are the likeliest to be written soon: saved
 * before the guest gets there, they cost no copy at all), then the rest, each group in
 * address order. */
static void plan_hot_first(struct snap_plan *pl)
{
	uint64_t n = 0;

	for (int pass = 0; pass < 2; pass++)
		for (uint64_t c = 0; c < pl->chunks; c++) {
			uint64_t r0, r1;
			bool hot = false;

			plan_chunk_regions(pl, c, &r0, &r1);
			for (uint64_t r = r0; r <= r1; r++)
				hot = hot || pl->hot[r];
			if (hot == (pass == 0))
				pl->order[n++] = c;
		}
}

void plan_make(struct snap_plan *pl, struct tracker *tracker, enum snap_policy policy,
	       double threshold, enum snap_order order)
{
	memset(pl->hot, 0, pl->n_regions);
	memset(pl->eager, 0, pl->n_regions);
	pl->regions_hot = 0;
	if (policy == SNAP_CCOW) {
		if (tracker)
			pl->regions_hot = tracker_classify(tracker, threshold, pl->hot);
		else if (threshold <= 0)
			pl->regions_hot = pl->n_regions, memset(pl->hot, 1, pl->n_regions);
	}
	if (policy != SNAP_CCOW || order == SNAP_LINEAR) {
		for (uint64_t c = 0; c < pl->chunks; c++)
			pl->order[c] = c;
		return;
	}
	plan_hot_first(pl);
}

void plan_hot_pages(struct snap_plan *pl, struct tracker *tracker, uint64_t max)
{
	if (max > pl->size / PAGE_SIZE)
		max = pl->size / PAGE_SIZE;
	pl->n_hot_pages = tracker ? tracker_hot_pages(tracker, pl->hot_pages, max) : 0;
}
