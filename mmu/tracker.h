/*
 * tracker.h - the coverage tracker: a dirty log sampled in windows, within a budget of
 * the guest's time, into per-region coverage (tracker.c), and an audit of what the
 * budget costs in accuracy (tracker_log.c). The log comes through struct
 * tracker_log_ops: a VM's is KVM's (vm_dirty_log in vmm/vm.c, from vmm/kvm/).
 */
#ifndef CCVM_TRACKER_H
#define CCVM_TRACKER_H

#include "coverage.h"
#include "heat.h"
#include "../base/worker.h"

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

/* What tracking may cost the guest (--coverage-budget, --coverage-stall-ms), and the
 * audit (--coverage-audit). */
#define TRACKER_BUDGET_PCT_DEFAULT_INT 1
#define TRACKER_STALL_MS_DEFAULT_INT   2
#define TRACKER_BUDGET_PCT_DEFAULT ((double)TRACKER_BUDGET_PCT_DEFAULT_INT)
#define TRACKER_STALL_MS_DEFAULT   ((double)TRACKER_STALL_MS_DEFAULT_INT)
#define TRACKER_STALL_SPAN_S       0.010 /* the stall bound holds over any span this long */
#define TRACKER_THRESHOLD_DEFAULT  0.80  /* the audit's, as snapshots' default */

struct tracker_budget {
	double pct;       /* the share of a vCPU's run time tracking may take in any second */
	double stall_ms;  /* the most a vCPU may lose to it within any TRACKER_STALL_SPAN_S */
	bool audit;       /* compare with unbudgeted full windows now and then (costly) */
	double threshold; /* the hot threshold the audit classifies at */
};

/* The last audit: the hot regions learnt under the budget against those one
 * unbudgeted full window saw (precision: of the first, the share also in the second;
 * recall: of the second, the share also in the first). */
struct tracker_audit {
	uint64_t audits;
	double precision, recall;
	double lost_s;          /* the guest's time lost in audit windows (not in lost_s) */
};

struct tracker {
	struct tracker_log log;
	struct tracker_budget budget;
	uint64_t ram_size;
	uint64_t *bitmap;       /* one bit per page, from the log's get */
	uint64_t *present;      /* one bit per page: resident when last scanned */
	uint64_t *mask;         /* one bit per page: the pages a window watches */
	uint32_t *sample;       /* a sampled window's pages */
	uint64_t max_sample;    /* the most a window may watch: the stall bound's faults */
	uint32_t *acc_w, *acc_k; /* per region: samples written, and samples taken */
	float *acc_e;           /* per region: the seconds they were watched, summed */
	uint64_t cursor;        /* the next region to sample */
	uint64_t rng;
	struct tracker_progress progress;
	double progress_rate;   /* its growth per second when nothing slows the guest */
	double fault_s;         /* a dirty-logging fault's cost, as the budget counts it */
	struct coverage cov;    /* guarded by lock */
	struct page_heat heat;  /* which pages were written recently; guarded by lock */
	uint8_t *hot;           /* per region: hot in the last classification (hysteresis) */
	double hot_threshold;   /* the threshold it was made at */
	struct worker w;        /* its thread; w.lock guards cov, held and the rest */
	double window_s;        /* guest time a window stands for */
	bool adaptive;          /* window follows the last snapshot's duration */
	uint64_t harvests;      /* windows that ran to their end */
	uint64_t harvest_ns;    /* time spent in the dirty-log ioctls */
	uint8_t *host;
	int held;               /* snapshots running (or about to): no window while > 0 */
	uint64_t holds;         /* holds ever taken (the progress rate skips their time) */
	bool logging;           /* a window is open */
	double last_ran_s;      /* the last window: how long the guest ran in it */
	double last_wall_s;     /* how long it was open */
	double last_fault_us;   /* the cost of a logging fault as counted then */
	double lost_s;          /* all windows: time the guest spent in logging faults */
	double longest_stall_s; /* the most a vCPU lost within any TRACKER_STALL_SPAN_S */
	uint64_t windows;       /* sampled windows opened */
	uint64_t faults;        /* their faults */
	struct { double end; uint64_t faults; } recent[16]; /* the last windows (budget) */
	unsigned n_recent;
	double rates[8];        /* the guest's progress rate in the last windows */
	unsigned n_rates;
	struct tracker_audit audit;
	double next_audit;      /* mono_s() of the next audit window */
};

/* The same over @log (NULL or no ops: no windows; coverage then comes only from
 * tracker_snapshot_observed, timed by @progress), within @budget (NULL: the defaults). */
int tracker_init(struct tracker *t, const struct tracker_log *log, uint8_t *host,
		   uint64_t ram_size, uint64_t region_size, unsigned window_ms,
		   struct tracker_progress progress, const struct tracker_budget *budget);

/* The budget's defaults, with @threshold for the audit. */
struct tracker_budget tracker_budget_default(double threshold);
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
