/*
 * engine.h - live snapshots of a running VM (policies stop, cow and ccow).
 */
#ifndef CCVM_ENGINE_H
#define CCVM_ENGINE_H

#include "image.h"
#include "pool.h"
#include "wqueue.h"
#include "../mmu/tracker.h"
#include "../mmu/gmem.h"
#include "../mmu/uffd.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * What the engine snapshots, and how it stops whoever writes there. The engine knows
 * memory and nothing else: a VM's vCPUs and process state come in through these ops
 * (vmm/persist_capture.c), and tests and bench/engine-bench pass host threads instead.
 */
struct snap_ops {
	/* Return once nothing writes the memory any more; -errno when it never will
	 * again (the VM has stopped). */
	int (*pause)(void *ctx);
	void (*resume)(void *ctx);
	/* While paused: add the non-memory state sections to the image. */
	int (*capture)(void *ctx, struct img_writer *img);
	/* Why no snapshot can start now (a lazy restore still loading), or NULL. May be
	 * NULL itself. */
	const char *(*refuse)(void *ctx);
	/* May be NULL. While paused, once the state is captured: the memory as it is now
	 * is what the image at @file will hold. */
	void (*at_instant)(void *ctx, const char *file);
};

struct snap_target {
	struct gmem *mem;
	const struct snap_ops *ops;
	void *ctx;
};

/* fork: the kernel's copy-on-write in a child process that writes the image (Redis
 * BGSAVE's mechanism, the CCoW paper's baseline). */
enum snap_policy { SNAP_STOP = 0, SNAP_COW = 1, SNAP_CCOW = 2, SNAP_FORK = 3, SNAP_NR_POLICIES };
enum snap_order { SNAP_HOT_FIRST = 0, SNAP_LINEAR = 1 };
enum snap_precopy { SNAP_PRECOPY_LAZY = 0, SNAP_PRECOPY_EAGER = 1 };

#define SNAP_DEFAULT_THRESHOLD 0.80
#define SNAP_DEFAULT_PAUSE_BUDGET_MS 10.0
#define SNAP_DEFAULT_PRECOPY SNAP_PRECOPY_LAZY /* see docs/evaluation.md, CCoW evaluation */

struct snap_request {
	const char *file;
	enum snap_policy policy;
	uint64_t rate;           /* writer bandwidth limit in bytes/s, 0 = unlimited */
	double threshold;        /* ccow: coverage at which a region is hot (0: CCoW-All) */
	enum snap_order order;   /* ccow: hot regions saved first, or address order */
	enum snap_precopy precopy; /* ccow: hot regions copied on first fault, or in the pause */
	double pause_budget_ms;  /* eager: how long the pause may grow to copy them */
	enum img_codec codec;    /* each chunk compressed with this when it shrinks */
	int level;               /* the codec's level; 0: its default */
	int threads;             /* compressing and writing the image; 0: SNAP_DEFAULT_THREADS */
	const char *parent;      /* incremental on this image (the last one tracked), or NULL */
	bool track;              /* keep tracking writes after this snapshot */
};

/* Snapshot storage defaults, measured in docs/evaluation.md, "Snapshot storage". */
#define SNAP_DEFAULT_CODEC IMG_CODEC_ZSTD
#define SNAP_DEFAULT_THREADS 2
/* With --snapshot-incremental: every 8th periodic snapshot is full, so a restore
 * follows at most 7 parents (and an image may need at most 64). */
#define SNAP_DEFAULT_FULL_EVERY 8

/* Fill in a request's level and threads when 0; -EINVAL with a message when the codec
 * does not take the level or threads is out of range. */
int snap_storage_check(struct snap_request *req, char *err, size_t errlen);

/* Figures of one snapshot (the JSON reply/event carries all of them). */
struct snap_figures {
	uint64_t id;
	char file[4096];
	enum snap_policy policy;
	bool done, ok;
	char error[256];
	uint64_t pause_us, duration_ms, bytes;
	uint64_t pages_total, pages_zero, pages_saved_by_writer, cow_faults, pages_copied;
	uint64_t copy_bytes_peak;
	double threshold;
	uint64_t region_size;
	enum snap_precopy precopy;
	uint64_t regions_hot, regions_precopied, pages_precopied, pages_precopied_unwritten;
	uint64_t regions_eager;  /* of regions_precopied: copied during the pause */
	uint64_t dirty_harvests, harvest_ms;
	uint64_t extra_bytes;    /* fork: peak PSS of parent and child less the parent's before */
	uint64_t regions_background; /* of regions_precopied: copied by the background copier */
	uint64_t faults_parallel_max; /* most write faults served at the same time */
	uint64_t pool_bytes, pool_resident_bytes; /* the copy pool at the end */
	enum img_codec codec;
	int level, threads;
	uint64_t bytes_raw;      /* bytes of data pages (holes excluded) */
	uint64_t bytes_stored;   /* what they take in the image: frames and raw pages */
	bool incremental;        /* holds only the pages written since its parent */
	uint64_t pages_held;     /* incremental: the pages it holds */
	uint64_t track_faults;   /* write faults taken only to track writes, since the
				  * previous snapshot (the cost of tracking an interval) */
	/* Copies held for the writer: the most bytes of guest pages held at once, the most
	 * pool bytes they took at once (packs compressed under pressure count at their
	 * compressed size), and the bytes of copies that were compressed. */
	uint64_t held_raw_bytes, held_stored_bytes, held_compressed_bytes;
};

/* Threads of the copy-on-write data path, and their priorities: fault threads first
 * (real-time where the process may, so a fault preempts whatever runs), then the
 * copier, then the writer (nice levels below the process: a positive number yields to
 * the vCPUs). Defaults measured in docs/internals.md, "The snapshot data path". */
#define SNAP_FAULT_THREADS_MAX 8
#define SNAP_DEFAULT_FAULT_THREADS 2
#define SNAP_DEFAULT_FAULT_RT true
#define SNAP_DEFAULT_COPIER_NICE 0
#define SNAP_DEFAULT_WRITER_NICE 5
#define SNAP_DEFAULT_POOL_KEEP_S 30.0
/* Held copies compressed under pressure: off, since on this project's 2-core machines
 * it raised faults and slowed the guest with a pool short of the hot set (docs/
 * evaluation.md, "Held copies"). */
#define SNAP_DEFAULT_HELD_COMPRESS false

struct snap_tuning {
	int fault_threads;       /* 1..SNAP_FAULT_THREADS_MAX */
	bool fault_rt;           /* fault threads SCHED_FIFO when permitted */
	int copier_nice, writer_nice;
	double pool_keep_s;      /* the pool is given back after this long without a
				  * snapshot (or three of the last intervals, if longer) */
	bool held_compress;      /* copies compressed when they fill half the pool
				  * (squeeze.c; a thread starts with the fault threads) */
};

struct sq_pack;
struct sq_digest;

/* A directory images may be written to, known by device and inode (a path that
 * reaches it through links counts too), and the name to show. */
#define SNAP_MAX_IMAGE_DIRS 72
struct snap_image_dir {
	dev_t dev;
	ino_t ino;
	const char *name;
};

struct snap_engine {
	struct snap_target t;
	uint8_t *host;           /* t.mem's */
	uint64_t size;
	pthread_mutex_t lock;
	bool busy;               /* one snapshot at a time */
	bool stopping;
	uint64_t next_id;
	struct snap_figures cur; /* the running (or last finished) snapshot */
	void (*on_done)(void *ctx);
	void *on_done_ctx;

	/* copy-on-write machinery, kept across snapshots */
	struct pool pool;
	struct uffd wp;          /* write protection, kept across snapshots */
	uint8_t *tables;         /* the per-page tables below, one mapping */
	size_t tables_len;
	uint8_t *state;          /* one enum page_state per guest page */
	void **copy;             /* COPIED pages: their pool buffer */
	uint8_t *split;          /* per 2 MiB chunk: a page-sized unprotect split its THP */
	uint8_t *region_busy;    /* per region: a thread is copying it (a try-lock) */
	uint8_t *pre;            /* per page: copied as part of a hot region */
	uint64_t *pre_hash;      /* their contents' hash, to tell at the end if written */
	uint8_t *faulted;        /* per page: the guest wrote it before the writer saved it */
	uint64_t *chunk_saved_at; /* per chunk: the guest's progress when the writer saved it */
	struct cov_obs *obs;     /* per region: what this snapshot saw the guest write */
	uint64_t progress_start; /* the guest's progress when the snapshot started */
	uint8_t *hot;            /* per region: hot at the snapshot instant */
	uint8_t *eager;          /* per region: copied during the pause, never protected */
	uint64_t *order;         /* chunks in the order the writer saves them */
	/* Write tracking for incremental snapshots (snapshot/track.c): every page is
	 * write-protected or marked dirty, one byte per page each. */
	uint8_t *dirty;          /* written since the last instant */
	uint8_t *dirty_instant;  /* what the running snapshot took as written */
	uint8_t *was_present;    /* present at the last instant */
	bool tracking;           /* on: pages saved stay protected */
	bool track_next;         /* the running snapshot leaves tracking on */
	char track_file[4096];   /* the last snapshot taken with tracking (real path) */
	uint64_t track_identity; /* its image's identity */
	uint64_t track_faults;   /* faults only tracking took, since the last instant */
	uint64_t periodic_n;     /* periodic snapshots started */
	struct tracker *tracker; /* coverage, or NULL when not tracked */
	uint64_t region_size;
	uint64_t n_regions;      /* the last one may be cut short by the end of RAM */
	enum snap_policy policy;
	struct snap_request def; /* what a request gets for what it does not name */
	/* where images may go (ctl snapshot, periodic ones): beneath one of these; none
	 * set: anywhere (engine-bench, tests) */
	struct snap_image_dir image_dirs[SNAP_MAX_IMAGE_DIRS];
	int n_image_dirs;
	struct snap_tuning tune; /* set before the first snapshot */
	pthread_t writer;
	pthread_t faulter[SNAP_FAULT_THREADS_MAX];
	int n_faulters;
	int faults_now;          /* write faults being served right now */
	uint64_t faults_most;    /* most at once since the engine started */
	/* the background copier (snapshot/cow.c), which also keeps the pool */
	pthread_t copier;
	bool copier_live, copier_stop, copy_wanted, copier_busy;
	pthread_mutex_t copier_lock;
	pthread_cond_t copier_cv;
	size_t pool_target;      /* slots the running (or next) snapshot should find ready */
	size_t cold_slots;       /* slots the cold regions of this snapshot could fill */
	uint64_t single_bytes;   /* bytes of single-page copies the last snapshot made */
	double last_start_s, interval_s; /* for giving the pool back when snapshots stop */
	/* held copies compressed under pressure (snapshot/squeeze.c) */
	pthread_t squeezer;
	bool squeezer_live, squeezer_stop, squeezer_busy; /* under copier_lock */
	uint8_t *sq_state;       /* per chunk: who may touch its copies */
	struct sq_pack *packs;   /* per span (a chunk, or a pool slot if smaller) */
	struct sq_digest *digests; /* per chunk: of one packed whole */
	uint64_t sq_span;        /* bytes */
	uint8_t *arena;          /* the arena slot packs go to now, or NULL */
	size_t arena_used;       /* its pages taken */
	uint64_t write_at;       /* the writer's place in order[] */
	struct wqueue wq;        /* chunks staged by the writer, written by its I/O thread */
	bool threads_live;
	bool writer_joinable;    /* a writer thread ran and was not joined yet */
	bool fault_stop;
	struct img_writer *img;
	pid_t child;             /* fork: the process writing the image, or 0 */
	int parent;              /* fork: our pid, which the child checks is still alive */
	uint64_t child_pss0;     /* fork: our PSS before the fork */
	long minflt0;            /* fork: our minor faults before it */
	uint64_t rate;
	uint64_t t_start_ns;
	double last_end_s;       /* when the last snapshot finished (mono_s), 0: none yet */
};

/* Periodic snapshots (ccvm run --snapshot-every ...), driven by the monitor thread. */
struct snap_schedule {
	double every_s;          /* start to start; 0: off */
	double gap_s;            /* or: from one snapshot's end to the next one's start */
	const char *dir;
	int keep;                /* newest images kept in dir */
	enum snap_policy policy;
	uint64_t rate;
	double threshold;
	enum snap_order order;
	enum snap_precopy precopy;
	double pause_budget_ms;
	enum img_codec codec;
	int level, threads;
	bool incremental;        /* track writes; snapshots incremental on the last one */
	int full_every;          /* with incremental: every Nth periodic snapshot is full */
	const char *log;         /* append each finished snapshot's figures here (JSON lines) */
};

/* True when periodic snapshots are on (every_s or gap_s). */
bool snap_schedule_on(const struct snap_schedule *s);

/* The first periodic snapshot's time, for a schedule starting at @now_s. */
double snap_schedule_first(const struct snap_schedule *s, double now_s);

/* Start the periodic snapshot due at @now_s (CLOCK_MONOTONIC seconds) if the engine is
 * idle; returns the time the next one is due (with gap_s, a time to look again while
 * one runs). */
double snap_schedule_tick(struct snap_engine *e, const struct snap_schedule *s, double now_s,
			  double due_s);

/* Delete all but the newest @keep periodic images in @dir. */
void snap_schedule_prune(const struct snap_schedule *s);

/* @tracker may be NULL (no coverage: ccow then treats every region as cold unless
 * the threshold is 0); @region_size must match the tracker's. */
int snap_engine_init(struct snap_engine *e, const struct snap_target *t, size_t pool_bytes,
		     struct tracker *tracker, uint64_t region_size);
void snap_engine_fini(struct snap_engine *e);

/*
 * snap_start - take a snapshot: pause, capture state, (cow: arm write protection,
 * resume, save in the background; stop: copy everything, then resume). Returns 0 with
 * the figures so far in @now, or -EBUSY/-errno with a message in @err.
 */
int snap_start(struct snap_engine *e, const struct snap_request *req, struct snap_figures *now,
	       char *err, size_t errlen);

/* Figures of snapshot @id (the current or last one); false if unknown. */
bool snap_figures_of(struct snap_engine *e, uint64_t id, struct snap_figures *out);

/* Called before guest memory is discarded or rewritten behind the guest's back
 * (munmap, MADV_DONTNEED, MAP_FIXED): pages still owed to a snapshot are copied. */
void snap_before_discard(struct snap_engine *e, uint64_t gpa, uint64_t len);

json_t *snap_figures_json(const struct snap_figures *f);
/* The engine between and during snapshots, for `ccvm ctl stats`: the copy pool's size,
 * resident and in-use bytes, the most write faults served at once since it started;
 * whether writes are tracked, the image an incremental snapshot may name as its
 * parent, and the faults tracking cost since the last instant. */
json_t *snap_engine_stats_json(struct snap_engine *e);
const char *snap_policy_name(enum snap_policy p);
int snap_policy_parse(const char *name, enum snap_policy *p);
int snap_order_parse(const char *name, enum snap_order *o);
int snap_precopy_parse(const char *name, enum snap_precopy *p);

#endif
