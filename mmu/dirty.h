/*
 * dirty.h - the coverage tracker: KVM dirty logging harvested into per-region coverage.
 */
#ifndef CCVM_DIRTY_H
#define CCVM_DIRTY_H

#include "coverage.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* A count that grows with the guest's work and not with time it spends stalled (the
 * guest's clock reads through the vDSO); NULL read: none. */
struct dirty_progress {
	uint64_t (*read)(const void *ctx);
	const void *ctx;
};

/*
 * Where the tracker reads which pages were written. A VM's tracker reads KVM's dirty
 * log (dirty_init); tests pass a fake, and a tracker without one (engine-bench on
 * plain memory) learns only from snapshots' own observations.
 */
struct dirty_log_ops {
	/* Logging on (every page reads as written, none is watched yet) or off. */
	int (*logging)(void *ctx, bool on);
	/* Watch the pages set in @pages (one bit per page): they read as not written
	 * until the next write to them. */
	int (*watch)(void *ctx, uint64_t *pages);
	/* One bit per page: written since watched (or never watched). */
	int (*get)(void *ctx, uint64_t *bitmap);
};

struct dirty_log {
	const struct dirty_log_ops *ops; /* NULL: no log, no windows */
	void *ctx;
};

/* dirty_init's log: memslot 0 of a KVM VM. */
struct dirty_kvm {
	int vm_fd;
	uint8_t *host;
	uint64_t ram_size;
};

struct dirty_tracker {
	struct dirty_log log;
	struct dirty_kvm kvm;
	uint64_t ram_size;
	uint64_t *bitmap;       /* one bit per page, from KVM_GET_DIRTY_LOG */
	uint64_t *present;      /* one bit per page: resident when the window opened */
	uint64_t *acc;          /* windows cut short, added up (see dirty_accumulate) */
	uint64_t *acc_present;  /* and the pages they watched */
	struct dirty_progress progress;
	double progress_rate;   /* its growth per second when nothing slows the guest (dirty_gap) */
	double fault_s;         /* a dirty-logging fault's cost, as measured so far */
	double acc_ran, acc_wall;
	struct coverage cov;    /* guarded by lock */
	uint8_t *hot;           /* per region: hot in the last classification (hysteresis) */
	double hot_threshold;   /* the threshold it was made at */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool running, stop;
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

/*
 * dirty_init - track coverage of memslot 0 of @vm_fd (@ram_size bytes at @host): enable
 * manual dirty-log protect and start the thread that switches dirty logging on for
 * each measuring window. @window_ms 0 means adaptive (1 s until a snapshot says
 * otherwise). @progress (its read may be NULL) times the windows. Returns 0 or -errno.
 */
int dirty_init(struct dirty_tracker *t, int vm_fd, uint8_t *host, uint64_t ram_size,
	       uint64_t region_size, unsigned window_ms, struct dirty_progress progress);
/* The same over @log (NULL or no ops: no windows; coverage then comes only from
 * dirty_snapshot_observed, timed by @progress). */
int dirty_init_log(struct dirty_tracker *t, const struct dirty_log *log, uint8_t *host,
		   uint64_t ram_size, uint64_t region_size, unsigned window_ms,
		   struct dirty_progress progress);
void dirty_fini(struct dirty_tracker *t);

/* Mark each region hot (1) or cold (0) in @hot (n_regions bytes) for a snapshot about
 * to start (coverage_classify); returns the count. */
uint64_t dirty_classify(struct dirty_tracker *t, double threshold, uint8_t *hot);

/* The guest's progress count now (0 without one): what snapshots time their
 * observations by. */
uint64_t dirty_progress_now(const struct dirty_tracker *t);

/* What a snapshot saw the guest write, per region, exposure in progress counts
 * (coverage_add_snapshot), the guest having made @progress during it; ignored while
 * the guest's normal progress rate is unknown, or when it made too little progress. */
void dirty_snapshot_observed(struct dirty_tracker *t, const struct cov_obs *obs, uint64_t progress);

/* A snapshot took @seconds: adaptive windows follow it (0.25 s .. 10 s). */
void dirty_snapshot_took(struct dirty_tracker *t, double seconds);

/* Around a snapshot: no dirty logging while it runs; holding closes (and counts) an
 * open window first (see dirty.c). Holds nest: each true needs one false. */
void dirty_hold(struct dirty_tracker *t, bool hold);


#endif
