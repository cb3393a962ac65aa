/*
 * track.h - which pages the guest wrote since the last snapshot, for incremental
 * snapshots (snapshot/track.c).
 */
#ifndef CCVM_TRACK_H
#define CCVM_TRACK_H

#include "engine.h"

/* Pages [@first, @first + @n) lose their write protection: mark them written. */
void track_unprotected(struct snap_engine *e, uint64_t first, uint64_t n);

/* A write fault on page @p, which is about to be unprotected. */
void track_fault(struct snap_engine *e, uint64_t p);

/* Before a snapshot starts (the engine reserved): -EINVAL with a message when
 * --parent or --track cannot be honoured. Sets e->track_next. */
int track_check(struct snap_engine *e, const struct snap_request *req, char *err, size_t errlen);

/* The path a child records for the parent it is taken after: its name alone when both
 * lie in one directory (the pair can move together), else the parent's real path. */
int track_parent_path(const struct snap_engine *e, const char *child, char *out, size_t len);

/* In the pause, once e->state says which pages are present: what this instant takes
 * as written (an incremental snapshot marks the others PS_PARENT), and a new interval
 * of tracking from here. */
void track_instant(struct snap_engine *e, bool incremental);

/* A snapshot failed: what it took as written is written still, and protection stays
 * (no page is PS_PROTECTED any more: faults only mark pages written). */
void track_failed(struct snap_engine *e);

/* A snapshot finished into @file: with tracking asked for, it is the base of the next
 * incremental snapshot; otherwise tracking is off. */
void track_done(struct snap_engine *e, const char *file);

#endif
