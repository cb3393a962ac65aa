/*
 * observe.c - what a snapshot saw the guest write, per region, for the coverage
 * tracker.
 *
 * A page copied with its region was watched until the end (written if its contents
 * changed meanwhile); any other present page until the writer saved its chunk (written
 * if the guest's write fault came first). Times are the guest's progress, not the
 * clock. Pages copied with their region but unchanged by the end are also the memory
 * CCoW spent for nothing (the paper's bloat).
 */
#include "observe.h"
#include "../base/pages.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

int observe_init(struct snap_observe *o, uint64_t n_regions, uint64_t pages)
{
	memset(o, 0, sizeof(*o));
	o->n_regions = n_regions;
	o->words = (pages + 63) / 64;
	o->obs = calloc(n_regions ? n_regions : 1, sizeof(struct cov_obs));
	o->written = calloc(o->words ? o->words : 1, sizeof(uint64_t));
	o->watched = calloc(o->words ? o->words : 1, sizeof(uint64_t));
	return o->obs && o->written && o->watched ? 0 : -ENOMEM;
}

void observe_fini(struct snap_observe *o)
{
	free(o->obs);
	free(o->written);
	free(o->watched);
	o->obs = NULL;
	o->written = o->watched = NULL;
}

/* Page @p was present at the instant, and @written since (as far as it was seen). */
static void observe_page(struct snap_observe *o, uint64_t p, bool written)
{
	o->watched[p / 64] |= 1ULL << (p % 64);
	if (written)
		o->written[p / 64] |= 1ULL << (p % 64);
}

uint64_t observe_snapshot(struct snap_observe *o, struct snap_ptab *pt,
			  const struct snap_plan *pl, const uint8_t *host, uint64_t end,
			  struct tracker *tracker, bool fold)
{
	uint64_t per_chunk = HUGE_SIZE / PAGE_SIZE, unwritten = 0;

	memset(o->obs, 0, o->n_regions * sizeof(o->obs[0]));
	memset(o->written, 0, o->words * sizeof(uint64_t));
	memset(o->watched, 0, o->words * sizeof(uint64_t));
	for (uint64_t p = 0; p < pt->pages; p++) {
		struct cov_obs *ob = &o->obs[p * PAGE_SIZE / pl->region_size];
		uint64_t until;

		if (pt->pre[p]) {
			bool same = XXH3_64bits(host + p * PAGE_SIZE, PAGE_SIZE) == pt->pre_hash[p];

			unwritten += same;
			ob->written += !same;
			observe_page(o, p, !same);
			until = end;
			pt->pre[p] = 0;
		} else if (ps_get(&pt->state[p]) == PS_ZERO) {
			continue;
		} else {
			bool w = pt->faulted[p] || (o->also_written &&
						    (o->also_written[p / 64] >> (p % 64) & 1));

			ob->written += w;
			observe_page(o, p, w);
			until = pt->chunk_saved_at[p / per_chunk];
		}
		ob->pages++;
		ob->exposure += until > o->progress_start ? (double)(until - o->progress_start) : 0;
	}
	if (fold && tracker) {
		tracker_snapshot_observed(tracker, o->obs,
					  end > o->progress_start ? end - o->progress_start : 0);
		tracker_pages_observed(tracker, o->written, o->watched);
	}
	return unwritten;
}
