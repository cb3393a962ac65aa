/*
 * engine.h - live snapshots of a memory range that others keep writing: the snapshot
 * engine's API (engine.c orchestrates the stages; docs/architecture.md names them).
 *
 * The engine knows memory and nothing else: a VM's vCPUs and process state come in
 * through struct snap_ops (vmm/persist_capture.c), and tests and bench/engine-bench
 * pass host threads instead.
 */
#ifndef CCVM_ENGINE_H
#define CCVM_ENGINE_H

#include "compactor.h"
#include "imgdir.h"
#include "request.h"
#include "../mmu/gmem.h"
#include "../mmu/tracker.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct img_writer;

/* How the engine stops whoever writes the memory, and what it adds to an image. */
struct snap_ops {
	/* Return once nothing writes the memory any more; -errno when it never will
	 * again (the VM has stopped). */
	int (*pause)(void *ctx);
	void (*resume)(void *ctx);
	/* While paused: add the non-memory state sections to the image. */
	int (*capture)(void *ctx, struct img_writer *img);
	/* May be NULL. Used instead of capture by a snapshot whose image this process
	 * finishes (every policy but fork, whose child finishes it): what capture adds,
	 * but sections of memory besides the engine's may be saved after the pause, by
	 * @finish. After it succeeded, @finish is called once, before the image is
	 * finished (@img: add the sections it left) or given up (@img NULL), from the
	 * thread that finishes it: 0, or -errno (the snapshot fails). */
	int (*capture_live)(void *ctx, struct img_writer *img);
	int (*finish)(void *ctx, struct img_writer *img);
	/* Why no snapshot can start now (a lazy restore still loading), or NULL. May be
	 * NULL itself. */
	const char *(*refuse)(void *ctx);
	/* May be NULL. While paused, once the state is captured: the memory as it is now
	 * is what the image at @file will hold. */
	void (*at_instant)(void *ctx, const char *file);
	/* May be NULL. The CPU time the writers of the memory (a VM's vCPU threads) took so
	 * far, never going back: compaction in idle time holds still while it grows. */
	uint64_t (*guest_cpu_ns)(void *ctx);
};

struct snap_target {
	struct gmem *mem;
	const struct snap_ops *ops;
	void *ctx;
};

struct snap_config {
	size_t pool_bytes;        /* the copy pool's address space */
	struct tracker *tracker;  /* coverage, or NULL (ccow then treats every region as
				   * cold unless the threshold is 0) */
	uint64_t region_size;     /* the tracker's */
	struct snap_tuning tune;
	struct snap_request def;  /* what a request gets for what it does not name */
	/* Where images may go (ctl snapshot, periodic ones): beneath one of these; none:
	 * anywhere (engine-bench, tests). */
	const struct snap_image_dir *dirs;
	int n_dirs;
};

/* The defaults: tuning and request as measured in docs/evaluation.md. */
void snap_config_defaults(struct snap_config *c);

struct snap_engine;

/* An engine over @t: 0, or -errno with the reason logged. */
int snap_engine_new(const struct snap_target *t, const struct snap_config *cfg,
		    struct snap_engine **out);
/* Abandon a snapshot still running (cleanly: its temporary file is removed) and join
 * every thread of the engine; it then refuses new snapshots, and its figures and
 * settings stay readable until snap_engine_free, which stops it first if need be.
 * Both take NULL. */
void snap_engine_stop(struct snap_engine *e);
void snap_engine_free(struct snap_engine *e);

/* Called from the engine's thread when a snapshot ends (NULL: nobody). */
void snap_engine_on_done(struct snap_engine *e, void (*fn)(void *ctx), void *ctx);

/* Compaction in idle time (a request's compact idle): called from the compactor's
 * thread when it finished with an image (snap_compaction_last says how); held while
 * a migration runs, as it is while a snapshot does. */
void snap_compaction_figures(struct snap_engine *e, struct compactor_figures *out);
void snap_engine_on_compacted(struct snap_engine *e, void (*fn)(void *ctx), void *ctx);
void snap_engine_compaction_hold(struct snap_engine *e, bool on);
bool snap_compaction_last(struct snap_engine *e, struct compactor_result *out);
/* {images, failed, bytes_in, bytes_out, running, held, guest_busy, waiting, dropped,
 * cpu_ms}, for `ccvm ctl stats`. */
json_t *snap_compaction_json(struct snap_engine *e);
const struct snap_request *snap_engine_defaults(const struct snap_engine *e);
struct tracker *snap_engine_tracker(const struct snap_engine *e);

/*
 * snap_start - take a snapshot: pause, capture state, (cow: arm write protection,
 * resume, save in the background; stop: copy everything, then resume). Returns 0 with
 * the figures so far in @now, or -EBUSY/-errno with a message in @err.
 */
int snap_start(struct snap_engine *e, const struct snap_request *req, struct snap_figures *now,
	       char *err, size_t errlen);

/* True while a snapshot runs (from its start until its image is finished). */
bool snap_busy(struct snap_engine *e);

/* Figures of snapshot @id (the current or last one; 0: the last); false if unknown. */
bool snap_figures_of(struct snap_engine *e, uint64_t id, struct snap_figures *out);

/* Called before memory is discarded or rewritten behind its writers' back (munmap,
 * MADV_DONTNEED, MAP_FIXED): pages still owed to a snapshot are copied. */
void snap_before_discard(struct snap_engine *e, uint64_t gpa, uint64_t len);

/* The engine between and during snapshots, for `ccvm ctl stats`: the copy pool's size,
 * resident and in-use bytes, the most write faults served at once since it started;
 * whether writes are tracked, the image an incremental snapshot may name as its
 * parent, and the faults tracking cost since the last instant. */
json_t *snap_engine_stats_json(struct snap_engine *e);

/* The share of the chunks holding data (@chunks, by codec) that each codec stores, as
 * fractions named "raw", "lz4", "zstd"; all 0 when no chunk holds data. */
json_t *snap_codec_mix_json(const uint64_t chunks[IMG_CODEC_AUTO]);

/* Periodic snapshots (ccvm run --snapshot-every ...), driven by the monitor thread. */
struct snap_schedule {
	double every_s;          /* start to start; 0: off */
	double gap_s;            /* or: from one snapshot's end to the next one's start */
	const char *dir;
	int keep;                /* newest images kept in dir */
	struct snap_request req; /* what each periodic snapshot asks (its file aside) */
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

#endif
