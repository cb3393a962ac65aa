/*
 * tracker_impl.h - what the coverage tracker's files share (tracker.c: the policy and
 * its sampled windows; tracker_log.c: the dirty log's calls, timed, the waits, and the
 * audit's full window). Not for use outside mmu/tracker*.c.
 */
#ifndef CCVM_TRACKER_IMPL_H
#define CCVM_TRACKER_IMPL_H

#include "tracker.h"

#define DIRTY_WINDOW_MIN  0.25
#define DIRTY_WINDOW_MAX  10.0
#define DIRTY_WINDOW_DEF  1.0
#define DIRTY_FAULT_S     100e-6 /* a dirty-logging fault as the budget counts it */
#define DIRTY_RATE_S      0.2    /* the guest's normal progress is timed in steps this long... */
#define DIRTY_RATE_MIN    100.0  /* ...and serves when it grows at least this fast, per s */

/* The dirty log's calls, their time added to harvest_ns. */
int tracker_logging(struct tracker *t, bool on);
int tracker_watch(struct tracker *t, uint64_t *pages);
int tracker_get(struct tracker *t);

/* Which pages of RAM hold data now, into t->present. */
int tracker_mark_present(struct tracker *t);

/* Sleep @s seconds unless told to stop, or (@wake_on_hold) a snapshot is coming;
 * true when stopping. */
bool tracker_sleep(struct tracker *t, double s, bool wake_on_hold);
bool tracker_held(struct tracker *t);

/* Progress since count @c0 (the guest writes the count: none when it went back). */
uint64_t tracker_progress_since(const struct tracker *t, uint64_t c0);

/* --coverage-audit: one unbudgeted full window of @plan seconds of guest run time, its
 * hot regions compared with those learnt so far into t->audit. */
int tracker_audit_window(struct tracker *t, double plan);

#endif
