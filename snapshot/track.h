/*
 * track.h - which pages the guest wrote since the last snapshot, for incremental
 * snapshots (track.c).
 */
#ifndef CCVM_TRACK_H
#define CCVM_TRACK_H

#include "ptab.h"
#include "request.h"
#include "../mmu/uffd.h"

#include <stdbool.h>
#include <stdint.h>

/*
 * Tracking state. The marks are the page tables' dirty[] (set with atomic stores by
 * fault threads and anything that lifts protection); the rest changes only between
 * snapshots or in a pause, under the engine's lock, or from its one writer thread.
 */
struct snap_track {
	struct snap_ptab *pt;
	bool tracking;           /* on: pages saved stay protected */
	bool next;               /* the running snapshot leaves tracking on */
	char file[4096];         /* the last snapshot taken with tracking (real path) */
	uint64_t identity;       /* its image's identity */
	uint64_t faults;         /* faults only tracking took, since the last instant */
};

void track_init(struct snap_track *tr, struct snap_ptab *pt);

/* Pages [@first, @first + @n) lose their write protection: mark them written. */
void track_unprotected(struct snap_track *tr, uint64_t first, uint64_t n);

/* A write fault on page @p, which is about to be unprotected. */
void track_fault(struct snap_track *tr, uint64_t p);

/* Before a snapshot starts: -EINVAL with a message when --parent or --track cannot
 * be honoured. Sets tr->next. */
int track_check(struct snap_track *tr, const struct snap_request *req, char *err,
		size_t errlen);

/* The path a child records for the parent it is taken after: its name alone when both
 * lie in one directory (the pair can move together), else the parent's real path. */
int track_parent_path(const struct snap_track *tr, const char *child, char *out, size_t len);

/* In the pause, once the page tables say which pages are present: what this instant
 * takes as written (an incremental snapshot marks the others PS_PARENT), and a new
 * interval of tracking from here. *@held: the pages the snapshot holds; *@faults: the
 * faults tracking cost since the last instant. */
void track_instant(struct snap_track *tr, bool incremental, uint64_t *held, uint64_t *faults);

/* A snapshot failed: what it took as written is written still, and protection stays
 * (no page is PS_PROTECTED any more: faults only mark pages written). */
void track_failed(struct snap_track *tr);

/* A snapshot finished into @file: with tracking asked for, it is the base of the next
 * incremental snapshot; otherwise tracking is off (and @wp, if open, lifted). */
void track_done(struct snap_track *tr, const char *file, struct uffd *wp);

#endif
