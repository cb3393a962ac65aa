/*
 * cow.h - the copy-on-write data path of a snapshot (cow.c): write protection, the
 * fault threads, region and page copies, the background copier and the pool it keeps.
 */
#ifndef CCVM_COW_H
#define CCVM_COW_H

#include "plan.h"
#include "pool.h"
#include "ptab.h"
#include "request.h"
#include "track.h"
#include "../mmu/uffd.h"
#include "../base/worker.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* Where a page goes that a fault must save itself (no pool buffer was ready): the
 * stage above, which owns the image. cow reports through this and calls nothing
 * above it. */
struct cow_sink {
	int (*save)(void *ctx, uint64_t p, const uint8_t *data);
	void (*fail)(void *ctx, int rc, const char *what);
	void *ctx;
};

/* What the data path did for the running snapshot (atomic counters; the engine zeroes
 * them when a snapshot starts). */
struct cow_counts {
	uint64_t cow_faults, faults_parallel_max, pages_copied;
	uint64_t regions_precopied, pages_precopied, regions_background, regions_eager;
	uint64_t pages_eager;       /* copied in the pause (eager regions' pages included) */
	uint64_t pause_copy_ns;     /* the pause's time spent copying them */
	uint64_t protect_ns;        /* and write-protecting all memory */
};

struct snap_cow {
	uint8_t *host;
	uint64_t size;
	struct snap_ptab *pt;
	struct snap_plan *pl;
	struct snap_track *tr;
	struct pool *pool;
	struct cow_sink sink;
	const struct snap_tuning *tune;
	struct uffd wp;             /* write protection, kept across snapshots */
	bool ccow;                  /* the running snapshot copies hot regions whole */
	bool unprotected;           /* its pause copies before protecting (--precopy
				     * rounds): a copy needs no lift */
	uint8_t *region_busy;       /* per region: a thread is copying it (a try-lock) */
	pthread_t faulter[SNAP_FAULT_THREADS_MAX];
	int n_faulters;
	bool fault_stop;
	int faults_now;             /* write faults being served right now */
	uint64_t faults_most;       /* most at once since the engine started */
	struct worker w;            /* the copier: wanted while a snapshot runs */
	/* The pool's sizing, the copier's alone between snapshots. */
	size_t pool_target;         /* slots the running (or next) snapshot should find ready */
	size_t cold_slots;          /* slots the cold regions of this snapshot could fill */
	uint64_t single_bytes;      /* bytes of single-page copies the last snapshot made */
	uint64_t eager_pages;       /* pages the running snapshot may copy in its pause */
	uint64_t last_present;      /* pages the last snapshot held (present at its instant) */
	uint64_t page_ns;           /* a page copied and unprotected in the pause, measured */
	double last_start_s, interval_s; /* for giving the pool back when snapshots stop */
	struct cow_counts n;
};

/* Over @host (@size bytes) with the tables, plan, tracking and pool of the engine:
 * 0 or -ENOMEM. Nothing runs until cow_threads_start. */
int cow_init(struct snap_cow *c, uint8_t *host, uint64_t size, struct snap_ptab *pt,
	     struct snap_plan *pl, struct snap_track *tr, struct pool *pool,
	     const struct snap_tuning *tune, const struct cow_sink *sink);
void cow_fini(struct snap_cow *c);

/* Open write protection and start the fault threads and the copier once. */
int cow_threads_start(struct snap_cow *c);
/* Stop and join them, and close the write protection. */
void cow_threads_stop(struct snap_cow *c);

/* Before the pause: fault in what a snapshot with @regions_hot hot regions will need
 * if the pool is cold, with room for what a pause of @budget_ns can copy (0: not
 * eager), for at most POOL_PREPARE_MAX_S; the copier does the rest while the snapshot
 * runs (and keeps that much ready for the next one). */
void cow_pool_prepare(struct snap_cow *c, uint64_t regions_hot, uint64_t budget_ns);

/* After cow_pool_prepare, for a snapshot that copies no region (--precopy rounds): the
 * pool given back down to what its pause and faults may take, as an earlier snapshot's
 * hot regions may have grown it far beyond (Redis: 450 MiB held for a pause of 13).
 * The pause copies what the rounds leave, @pause_pages (0: not known), when that is
 * less than all the budget could copy (Redis: 80 MiB kept ready for ~8,000 pages). */
void cow_pool_fit(struct snap_cow *c, uint64_t pause_pages);
/* While paused: size the pool for this snapshot (@ccow: hot regions are copied whole)
 * and hand it out afresh. */
void cow_pool_plan(struct snap_cow *c, bool ccow);
/* After the resume: the copier starts on the hot regions. */
void cow_copy_begin(struct snap_cow *c);
/* When the writer has saved everything: the copier stops and every fault being served
 * has been; no page is left half saved. */
void cow_copy_end(struct snap_cow *c);

/* The guest (or the monitor) wants to write page @p: keep its old contents, and with
 * @wake let the write proceed. */
void cow_page(struct snap_cow *c, uint64_t p, bool wake);

/* While paused (--precopy eager), after cow_protect, into pool memory already faulted
 * in, never growing it: hot regions in the writer's order, then the plan's hot pages
 * hottest first, then, when all the rest fits the pool and the time, every other
 * present page; each copy's protection lifted at once, so the guest takes no trap
 * there. Stops before the pause (started at @t_start_ns, mono_ns) exceeds @budget_ns. */
void cow_precopy_eager(struct snap_cow *c, uint64_t t_start_ns, uint64_t budget_ns);

/* After a failed snapshot (no fault served for it any more): copies never written go
 * back to the pool, or it would shrink with every failure. */
void cow_reclaim(struct snap_cow *c);

/* Write-protect all memory (in the pause, before any copy made in it). */
int cow_protect(struct snap_cow *c);

/* Write-protect only the pages still PS_PROTECTED, a run of neighbours in one call (in
 * the pause of --precopy rounds, after its copies: the others stand in the image). */
int cow_protect_rest(struct snap_cow *c);

#endif
