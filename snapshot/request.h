/*
 * request.h - what a snapshot is asked to do and what it reports: the policies, a
 * request, the figures of one snapshot, the tuning of the data path, and their
 * defaults (request.c: their names as users write them, and the storage checks).
 */
#ifndef CCVM_REQUEST_H
#define CCVM_REQUEST_H

#include "codec.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* fork: the kernel's copy-on-write in a child process that writes the image (Redis
 * BGSAVE's mechanism, the CCoW paper's baseline). */
enum snap_policy { SNAP_STOP = 0, SNAP_COW = 1, SNAP_CCOW = 2, SNAP_FORK = 3, SNAP_NR_POLICIES };
enum snap_order { SNAP_HOT_FIRST = 0, SNAP_LINEAR = 1 };
/* lazy: hot regions copied on their first fault; eager: in the pause; rounds: memory
 * written to the image before the pause while the guest runs, again for what it
 * rewrites (the dirty log), until what is left fits the pause (precopy.c); auto:
 * rounds unless hot regions hold three quarters of the memory in use (dense writes,
 * which ccow copies whole by region: eager then), or rounds it chose did not converge
 * and more than a quarter is hot (engine_rounds.c, snap_auto_choice). */
enum snap_precopy { SNAP_PRECOPY_LAZY = 0, SNAP_PRECOPY_EAGER = 1, SNAP_PRECOPY_ROUNDS = 2,
		    SNAP_PRECOPY_AUTO = 3 };
/* off: the image stays as the snapshot stored it; idle: once the snapshot has ended,
 * the engine's compactor rewrites it smaller in idle time (compactor.c). */
enum snap_compact { SNAP_COMPACT_OFF = 0, SNAP_COMPACT_IDLE = 1 };

#define SNAP_DEFAULT_THRESHOLD 0.80
/* auto within 10 ms: on Redis in VMs rounds gave a p99.9 during snapshots 2.5x lower
 * than eager and no fault; on dense writers eager keeps CCoW's whole-region copies
 * (docs/evaluation.md, "Redis must not feel a snapshot"). */
#define SNAP_DEFAULT_PRECOPY SNAP_PRECOPY_AUTO
#define SNAP_DEFAULT_PAUSE_BUDGET_MS_INT 10
#define SNAP_DEFAULT_PAUSE_BUDGET_MS ((double)SNAP_DEFAULT_PAUSE_BUDGET_MS_INT)

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
	enum snap_compact compact; /* a full image that is no chain's anchor: compacted after */
};

/* Snapshot storage defaults, measured in docs/evaluation.md, "Snapshot storage". */
#define SNAP_DEFAULT_CODEC IMG_CODEC_ZSTD
#define SNAP_DEFAULT_THREADS 2
#define SNAP_THREADS_MAX 16 /* the writer's I/O threads (WQ_THREADS_MAX) */
/* A writer's rate limit at most 1 TB/s in MB/s ("no limit" is 0): the bytes/s derived
 * from it stay exact. */
#define SNAP_MAX_RATE_MBS 1e6
/* With --snapshot-incremental: every 8th periodic snapshot is full, so a restore
 * follows at most 7 parents (and an image may need at most 64). */
#define SNAP_DEFAULT_FULL_EVERY 8

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
	uint64_t codec_chunks[IMG_CODEC_AUTO]; /* chunks with data, by their codec (0: raw) */
	double compress_mb_s;    /* input MB/s the threads compressed, all together */
	double disk_mb_s;        /* MB/s the disk took while a write was in flight */
	bool incremental;        /* holds only the pages written since its parent */
	uint64_t pages_held;     /* incremental: the pages it holds */
	uint64_t track_faults;   /* write faults taken only to track writes, since the
				  * previous snapshot (the cost of tracking an interval) */
	/* Copies held for the writer: the most bytes of guest pages held at once, the most
	 * pool bytes they took at once (packs compressed under pressure count at their
	 * compressed size), and the bytes of copies that were compressed. */
	uint64_t held_raw_bytes, held_stored_bytes, held_compressed_bytes;
	/* Memory the snapshot took besides the guest's: the copy pool's resident bytes at
	 * their most and the writer's buffers (fork: extra_bytes). Never more than
	 * --snapshot-pool for cow and ccow. */
	uint64_t extra_bytes_peak;
	uint64_t pages_eager;    /* of pages_precopied: copied in the pause (--precopy eager) */
	uint64_t pause_copy_us;  /* the pause's time spent copying them */
	uint64_t pause_protect_us; /* and write-protecting the rest (cow, ccow) */
	/* --precopy rounds: rounds written before the pause, the pages they wrote, the
	 * time from the request to the pause, and the pages the pause found rewritten
	 * since their last round; whether auto's rounds gave up in round 0. */
	uint64_t rounds, pages_presaved, presave_ms, pages_redirtied;
	bool rounds_gave_up;
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
/* --snapshot-pool: a snapshot's extra memory (copy pool, held copies, the writer's
 * buffers) at most this share of guest RAM by default, within these bounds (measured in
 * docs/evaluation.md, "Redis under snapshots"). */
#define SNAP_DEFAULT_POOL_SHARE 0.5
#define SNAP_POOL_MIN (32ULL << 20)
#define SNAP_POOL_MAX (16ULL << 30)
/* Held copies compressed under pressure: off, since on this project's 2-core machines
 * it raised faults and slowed the guest with a pool short of the hot set (docs/
 * evaluation.md, "Held copies"). */
#define SNAP_DEFAULT_HELD_COMPRESS false
#define SNAP_DEFAULT_BACKGROUND_IDLE false

struct snap_tuning {
	int fault_threads;       /* 1..SNAP_FAULT_THREADS_MAX */
	bool fault_rt;           /* fault threads SCHED_FIFO when permitted */
	int copier_nice, writer_nice;
	double pool_keep_s;      /* the pool is given back after this long without a
				  * snapshot (or three of the last intervals, if longer) */
	bool held_compress;      /* copies compressed when they fill half the pool
				  * (squeeze.c; a thread starts with the fault threads) */
	/* A model of VM hosts for bench/engine-bench on plain memory: every write fault
	 * spins this long before it is served (a trap in a VM on our KVM hosts costs
	 * 75-150 us, on plain memory about 56). 0 everywhere else. */
	unsigned trap_cost_us;
	/* The copier, the writer and its compressors run SCHED_IDLE: only on a CPU the
	 * guest leaves free, as a BGSAVE child effectively does (docs/evaluation.md). */
	bool background_idle;
};

/* Fill in a request's level and threads when 0; -EINVAL with a message when the codec
 * does not take the level or threads is out of range. */
int snap_storage_check(struct snap_request *req, char *err, size_t errlen);

/* What a request makes the engine do, decided once (snap_mode_of) from its policy and
 * pre-copy, after --precopy auto is resolved (engine_rounds.c): how the pause arms
 * memory, whether it copies pages within its budget, what the plan takes it for, and
 * who writes the image. engine.c's steps read only this, never the request's names. */
enum snap_arm {
	SNAP_ARM_NONE,    /* stop, fork: memory is not write-protected */
	SNAP_ARM_PROTECT, /* cow, ccow: all of it is */
	SNAP_ARM_ROUNDS,  /* --precopy rounds: only what its rounds left */
};
enum snap_write {
	SNAP_WRITE_PAUSED,     /* stop: in the pause */
	SNAP_WRITE_FORKED,     /* fork: a child */
	SNAP_WRITE_BACKGROUND, /* cow, ccow: a thread, after the pause */
	SNAP_WRITE_ROUNDS,     /* --precopy rounds: a thread, before the pause and after */
};
struct snap_mode {
	enum snap_arm arm;
	bool pause_copies;      /* ccow eager or rounds: pages copied in the pause */
	enum snap_policy plan;  /* rounds has no hot region (its rounds wrote them): cow */
	enum snap_write write;
};
struct snap_mode snap_mode_of(const struct snap_request *req);
const char *snap_precopy_name(enum snap_precopy p);

const char *snap_policy_name(enum snap_policy p);
int snap_policy_parse(const char *name, enum snap_policy *p);
int snap_order_parse(const char *name, enum snap_order *o);
int snap_precopy_parse(const char *name, enum snap_precopy *p);

/*
 * The fields of a request as users write them: `ctl snapshot --KEY VALUE`, and for the
 * fields periodic snapshots take too, `run --snapshot-KEY VALUE`. One table (request.c)
 * holds each field's key, kind, bounds and place, so that the command line and the
 * control socket accept the same values and say the same of a bad one.
 */
enum snap_field_kind {
	SNAP_F_POLICY, SNAP_F_ORDER, SNAP_F_PRECOPY, SNAP_F_CODEC, SNAP_F_LEVEL,
	SNAP_F_INT, SNAP_F_REAL, SNAP_F_RATE, SNAP_F_PATH, SNAP_F_FLAG, SNAP_F_COMPACT
};

struct snap_field {
	const char *key;
	enum snap_field_kind kind;
	double min, max;         /* SNAP_F_INT, SNAP_F_REAL, SNAP_F_RATE (MB/s) */
	size_t off;              /* in struct snap_request */
	bool run;                /* also `run --snapshot-KEY` (periodic snapshots) */
	const char *metavar;     /* what the synopsis shows after --KEY; NULL for a flag */
	const char *want;        /* what a value must be, as every message says it */
};

/* The field named @key (with or without the "snapshot-" prefix), or NULL. */
const struct snap_field *snap_field_find(const char *key);
/* The @i-th field, NULL past the last. */
const struct snap_field *snap_field_at(int i);
/* @text (NULL: the key given without a value) into @req's field @f. 0, or -EINVAL
 * with "--@prefix@key TEXT: what it must be" in @err, the same for every caller. */
int snap_field_set(struct snap_request *req, const struct snap_field *f, const char *prefix,
		   const char *text, char *err, size_t errlen);
/* " [--KEY METAVAR]" of field @f into @buf: snprintf's count. */
int snap_field_usage(const struct snap_field *f, char *buf, size_t len);
/* "[--policy ccow|cow|stop|fork] [--threshold T] ...": every field, for usage lines. */
const char *snap_fields_synopsis(void);

/* A snapshot's figures as the control socket and --snapshot-log give them (figures.c). */
json_t *snap_figures_json(const struct snap_figures *f);

#endif
