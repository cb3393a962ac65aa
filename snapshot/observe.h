/*
 * observe.h - what a snapshot saw the guest write, per region, fed back to the
 * coverage tracker (observe.c).
 */
#ifndef CCVM_OBSERVE_H
#define CCVM_OBSERVE_H

#include "plan.h"
#include "ptab.h"
#include "../mmu/coverage.h"
#include "../mmu/tracker.h"

#include <stdbool.h>
#include <stdint.h>

/* The observations of the last snapshot: the writer thread's alone. */
struct snap_observe {
	struct cov_obs *obs;      /* per region */
	uint64_t n_regions;
	uint64_t *written, *watched; /* per page, one bit each (page heat, mmu/heat.h) */
	uint64_t words;
	uint64_t progress_start;  /* the guest's progress at the instant */
	/* Pages seen written before the instant, by a pre-copy's rounds (precopy.c), or
	 * NULL: taken as written besides what faults saw. */
	const uint64_t *also_written;
};

/* For @n_regions regions of @pages pages in all: 0 or -ENOMEM. */
int observe_init(struct snap_observe *o, uint64_t n_regions, uint64_t pages);
void observe_fini(struct snap_observe *o);

/* At the end of a snapshot of @host, the guest's progress now @end: per region, the
 * pages it held and those written while it ran, folded into @tracker when @fold (and
 * @tracker is not NULL). Clears the page tables' pre[]. Returns the pages copied with
 * their region and unchanged by the end (the memory CCoW spent for nothing). */
uint64_t observe_snapshot(struct snap_observe *o, struct snap_ptab *pt,
			  const struct snap_plan *pl, const uint8_t *host, uint64_t end,
			  struct tracker *tracker, bool fold);

#endif
