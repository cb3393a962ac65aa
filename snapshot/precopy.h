/*
 * precopy.h - --precopy rounds: memory written into the image before the snapshot's
 * instant while its writers keep running, again for what they rewrite, until what is
 * left fits the pause (precopy.c). Live migration's pre-copy, aimed at a file.
 */
#ifndef CCVM_PRECOPY_H
#define CCVM_PRECOPY_H

#include "engine.h"
#include "ptab.h"
#include "../mmu/gmem.h"
#include "../mmu/tracker.h"

#include <stdbool.h>
#include <stdint.h>

struct img_writer;

/* State of the running pre-copy; the bitmaps are kept between snapshots. Used by the
 * one thread that runs the snapshot up to its instant, and by nobody else. */
struct snap_rounds {
	struct gmem *mem;
	struct tracker_log log;  /* the dirty log: the tracker's (KVM's in a VM) */
	uint64_t pages, words;
	uint64_t *dirty;         /* the log's bitmap */
	uint64_t *marks;         /* what the monitor may have written (gmem_mark_start) */
	uint8_t *buf;            /* runs are copied here, then written */
	bool logging, marking;
	/* Figures of the running snapshot. */
	uint64_t rounds, pages_sent, pages_redirtied;
	uint64_t page_ns;        /* a page copied in the pause, as the last one measured */
};

/* Over @mem, whose writes @log reports (no ops: rounds refused). 0 or -ENOMEM. */
int rounds_init(struct snap_rounds *r, struct gmem *mem, const struct tracker_log *log);
void rounds_fini(struct snap_rounds *r);

/* Why @r cannot pre-copy, or NULL. */
const char *rounds_refusal(const struct snap_rounds *r);

/*
 * rounds_run - before the pause: the log and the monitor's marks on, the writers
 * paused once through @ops (so that no pointer into memory handed out before the
 * marks is still in use), then every page that holds data into @img, then the pages
 * written since, round after round, until they would take less than @budget_ns to
 * copy in the pause, stop shrinking, or ROUNDS_MAX rounds were made. 0, -ECANCELED
 * when *@stop turns true, or -errno; rounds_end in any case afterwards.
 */
int rounds_run(struct snap_rounds *r, struct img_writer *img, const struct snap_ops *ops,
	       void *ctx, uint64_t budget_ns, const bool *stop);

/*
 * rounds_instant - in the pause, once ptab_mark said which pages hold data: each such
 * page not written since its last round stands in @img as written (PS_SAVED); the
 * others stay PS_PROTECTED and are listed in @out (at most @max), for the pause to
 * copy. Returns how many were listed.
 */
uint64_t rounds_instant(struct snap_rounds *r, struct snap_ptab *pt, struct img_writer *img,
			uint32_t *out, uint64_t max);

/* Logging and marks off (after the pause, or after a failure). */
void rounds_end(struct snap_rounds *r);

#endif
