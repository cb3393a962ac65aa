/*
 * tracker.h - the coverage tracker: a dirty log harvested in windows into per-region
 * coverage, and the window policy (tracker.c). The log comes through struct
 * tracker_log_ops: a VM's is KVM's (vm_dirty_log in vmm/vm.c,
 * from vmm/kvm/).
 */
#ifndef CCVM_TRACKER_H
#define CCVM_TRACKER_H

#include "coverage.h"
#include "heat.h"
#include "../vmm/base/worker.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* A count that grows with the guest's work and not with time it spends stalled (the
 * guest's clock reads through the vDSO); NULL read: none. */
struct tracker_progress {
	uint64_t (*read)(const void *ctx);
	const void *ctx;
};

/*
 * Where the tracker reads which pages were written. A VM's tracker reads KVM's dirty
 * log (vm_dirty_log); tests pass a fake, and a tracker without one (engine-bench on
 * plain memory) learns only from snapshots' own observations.
 */
struct tracker_log_ops {
	/* Logging on (every page reads as written, none is watched yet) or off. */
	int (*logging)(void *ctx, bool on);
	/* Watch the pages set in @pages (one bit per page): they read as not written
	 * until the next write to them. */
	int (*watch)(void *ctx, uint64_t *pages);
	/* One bit per page: written since watched (or never watched). */
	int (*get)(void *ctx, uint64_t *bitmap);
};

struct tracker_log {
	const struct tracker_log_ops *ops; /* NULL: no log, no windows */
	void *ctx;
};

struct tracker {
	struct tracker_log log;
	uint64_t ram_size;
	uint64_t *bitmap;       /* one bit per page, from the log's get */
	uint64_t *present;      /* one bit per page: resident when the window opened */
	uint64_t *acc;          /* windows cut short, added up (see tracker_accumulate) */
	uint64_t *acc_present;  /* and the pages they watched */
	struct tracker_progress progress;
	double progress_rate;   /* its growth per second when nothing slows the guest (tracker_gap) */
	double fault_s;         /* a dirty-logging fault's cost, as measured so far */
	double acc_ran, acc_wall;
	struct coverage cov;    /* guarded by lock */
	struct page_heat heat;  /* which pages were written recently; guarded by lock */
	uint8_t *hot;           /* per region: hot in the last classification (hysteresis) */
	double hot_threshold;   /* the threshold it was made at */
	struct worker w;        /* its thread; w.lock guards cov, held and the rest */
	double window_s;        /* guest time a window stands for */
	bool adaptive;          /* window follows the last snapshot's duration */
	uint64_t harvests;
	uint64_t harvest_ns;    /* time spent in the dirty-log ioctls */
	uint8_t *host;
	int held;               /* snapshots running (or about to): no window while > 0 */
	bool logging;           /* a window is open */
	double last_ran_s;      /* the last window: how long the guest ran in it */
	double last_wall_s;     /* how long it was open */
	double last_fault_us;   /* the cost of a logging fault as known then */
	double lost_s;          /* all windows: time the guest spent in logging faults */
};

/* The same over @log (NULL or no ops: no windows; coverage then comes only from
 * tracker_snapshot_observed, timed by @progress). */
int tracker_init(struct tracker *t, const struct tracker_log *log, uint8_t *host,
		   uint64_t ram_size, uint64_t region_size, unsigned window_ms,
		   struct tracker_progress progress);
void tracker_fini(struct tracker *t);

/* Mark each region hot (1) or cold (0) in @hot (n_regions bytes) for a snapshot about
 * to start (coverage_classify); returns the count. */
uint64_t tracker_classify(struct tracker *t, double threshold, uint8_t *hot);

/* Each region's expected coverage over @seconds (coverage_of) into @out, at most @n
 * of them, all 0 while nothing is known; returns how many were written. For the
 * benchmarks that compare the threshold with a cost model. */
uint64_t tracker_region_coverage(struct tracker *t, double seconds, double *out, uint64_t n);

/* The guest's progress count now (0 without one): what snapshots time their
 * observations by. */
uint64_t tracker_progress_now(const struct tracker *t);

/* What a snapshot saw the guest write, per region, exposure in progress counts
 * (coverage_add_snapshot), the guest having made @progress during it; ignored while
 * the guest's normal progress rate is unknown, or when it made too little progress. */
void tracker_snapshot_observed(struct tracker *t, const struct cov_obs *obs, uint64_t progress);

/* What a snapshot saw, page by page: @written, one bit per page written while it
 * watched, among @watched (the pages present at its instant). Ages the page ranks
 * (heat.h) whatever the guest's progress. */
void tracker_pages_observed(struct tracker *t, const uint64_t *written, const uint64_t *watched);

/* The pages written in the observations the heat remembers (heat.h), hottest first,
 * at most @max into @out; returns how many. */
uint64_t tracker_hot_pages(struct tracker *t, uint32_t *out, uint64_t max);

/* A snapshot took @seconds: adaptive windows follow it (0.25 s .. 10 s). */
void tracker_snapshot_took(struct tracker *t, double seconds);

/* Around a snapshot: no dirty logging while it runs; holding closes (and counts) an
 * open window first (see tracker.c). Holds nest: each true needs one false. */
void tracker_hold(struct tracker *t, bool hold);


#endif
