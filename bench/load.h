/*
 * load.h - host threads that write plain memory, as a snapshot target.
 *
 * The snapshot engine's stand-in for a guest on machines without /dev/kvm: N threads
 * overwrite 1 KiB blocks of a memory range chosen by a Zipf distribution (as
 * guest/zipfbench does in a VM), and pause and resume on the engine's request
 * (struct snap_ops). Used by bench/engine-bench and the unit tests of the engine.
 */
#ifndef CCVM_LOAD_H
#define CCVM_LOAD_H

#include "../guest/zipf.h"
#include "../mmu/gmem.h"
#include "../snapshot/engine.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define LOAD_BLOCK ZIPF_BLOCK_SIZE /* bytes a write covers, as zipfbench's blocks */
#define LOAD_BATCH 64          /* updates per timed batch */
#define LOAD_HIST_BUCKETS 1024 /* log-linear, 16 per power of two */
#define LOAD_MAX_THREADS 64

/* What the blocks hold: zipfbench's words (incompressible), text records of words and
 * numbers (compressible as a key-value store's values are), or a memory dump tiled
 * over memory (a real program's data, e.g. Redis': an update rewrites a block with the
 * dump's block at its place, its first 8 bytes a new value, so memory stays as
 * compressible as the program's own while every write still changes it). */
enum load_data { LOAD_DATA_ZIPF = 0, LOAD_DATA_TEXT = 1, LOAD_DATA_DUMP = 2 };

struct load_opts {
	int threads;
	enum load_data data;
	const uint8_t *dump;     /* LOAD_DATA_DUMP: the dump, whole blocks */
	uint64_t dump_len;
	double alpha;            /* Zipf exponent over block ranks (rank 1 hottest) */
	bool scatter;            /* ranks spread over memory rather than packed */
	uint64_t seed;
	bool reference;          /* keep a copy of memory at each snapshot's instant */
	double rate;             /* open loop: updates per second over all threads; 0: flat out */
	unsigned log_fault_us;   /* a write to a watched page while logging: spun this long */
};

/* Open loop: each update's latency from its intended start, split by whether a
 * snapshot ran at that start (load_set_busy). */
enum { LOAD_IDLE = 0, LOAD_BUSY = 1 };

struct load;

struct load_thread {
	struct load *l;
	pthread_t th;
	uint64_t rng;
	uint64_t updates;        /* read by others while it runs */
	uint64_t max_batch_ns;   /* the longest batch of LOAD_BATCH updates */
	uint64_t hist[LOAD_HIST_BUCKETS]; /* batch durations */
	uint64_t lat[2][LOAD_HIST_BUCKETS]; /* open loop: update latencies, idle and busy */
	uint64_t lat_max[2];
	uint64_t late_ns;        /* open loop: the most an update started behind its time */
	bool clocked;            /* atomic: it runs, its CPU clock is (load_cpu_ns) */
	clockid_t clock;
};

struct load {
	struct gmem *mem;
	struct load_opts o;
	struct zipf z;
	uint64_t nblocks;
	struct zipf_scatter perm;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int pause_req;           /* nested pauses asked */
	bool stop;
	int parked, live;
	int started;
	struct load_thread *t;
	uint8_t *ref;            /* with o.reference: memory at the last snapshot's instant */
	uint64_t instants;       /* snapshots that reached their instant */
	int busy;                /* a snapshot runs (open loop: latencies go to LOAD_BUSY) */
	uint64_t t0_ns;          /* open loop: when the first update was due */
	/* A bit per page, set after each write to it: a dirty log of the memory, as KVM
	 * keeps one of a VM's (load_dirty_log). */
	uint64_t *dirty;
	uint64_t dirty_words;
	bool logging;            /* the dirty log is on: a watched page's first write faults */
	uint64_t log_faults;     /* those faults, as the model charged them */
	uint64_t cpu_done_ns;    /* atomic: the CPU time of threads that have ended */
};

/* Fill every block of @mem once (so every page is present), then start the threads.
 * Returns 0, -EINVAL for bad options, or -errno. */
int load_start(struct load *l, struct gmem *mem, const struct load_opts *o);

/* Stop and join the threads (a pause still held is released). The figures stay
 * readable until load_fini frees them. */
void load_stop(struct load *l);
void load_fini(struct load *l);

/* Fill block @b of memory, at @blk (LOAD_BLOCK bytes), as @o->data says, from @value. */
void load_block_fill(const struct load_opts *o, uint64_t *blk, uint64_t b, uint64_t value);

/* Open loop: updates whose intended start comes while @busy go to the busy account. */
void load_set_busy(struct load *l, bool busy);

/* Open loop, after load_stop: the latency at quantile @q of updates started idle or
 * busy (@which), and the longest, in ns; 0 when there were none. Every update counts
 * once (the latencies are weighted by operation). */
uint64_t load_latency_quantile_ns(const struct load *l, int which, double q);
uint64_t load_latency_max_ns(const struct load *l, int which);
uint64_t load_latency_count(const struct load *l, int which);

/* Updates done so far by all threads. */
uint64_t load_updates(struct load *l);

/* The longest batch and the batch duration at quantile @q (0..1), in ns, over all
 * threads; call after load_stop. */
uint64_t load_max_batch_ns(const struct load *l);
uint64_t load_batch_quantile_ns(const struct load *l, double q);

/* snap_ops for a target whose ctx is a struct load: pause waits until every thread
 * is parked between batches; capture adds no section (plain memory has no vCPUs);
 * at_instant copies memory to l->ref when asked for (o.reference). Tests that need
 * more wrap these functions. */
extern const struct snap_ops load_snap_ops;
/* The writers' own dirty log, for a tracker (and so --precopy rounds) on plain memory:
 * what KVM's would say of a VM, and what it would cost: while logging is on, a write to
 * a watched page (its bit cleared) is a fault of o.log_fault_us, spun by the writer as
 * a vCPU waits for KVM. Valid once load_start succeeded. */
void load_dirty_log(struct load *l, struct tracker_log *out);

int load_pause(void *ctx);
void load_resume(void *ctx);
int load_capture(void *ctx, struct img_writer *img);
void load_at_instant(void *ctx, const char *file);

#endif
