/*
 * engine_impl.h - the snapshot engine as its stages, for engine.c, the files that
 * report on it (figures.c, schedule.c) and the unit tests. Nothing else looks inside.
 *
 * The stages, lowest first; each uses only those before it, and reports upwards only
 * through what it returns or through a sink (struct cow_sink):
 *
 *   ptab (page tables) -> plan -> track -> cow -> squeeze -> writer (-> wqueue ->
 *   image) -> forkpol; observe reads the tables at the end. precopy (--precopy
 *   rounds) writes the image before the pause and hands the pause the pages left.
 */
#ifndef CCVM_ENGINE_IMPL_H
#define CCVM_ENGINE_IMPL_H

#include "compactor.h"
#include "cow.h"
#include "engine.h"
#include "forkpol.h"
#include "observe.h"
#include "plan.h"
#include "precopy.h"
#include "pool.h"
#include "ptab.h"
#include "squeeze.h"
#include "track.h"
#include "writer.h"

#include <pthread.h>

struct snap_engine {
	struct snap_target t;
	bool finish_due;          /* capture_live succeeded: t.ops->finish owed (engine.c) */
	uint8_t *host;            /* t.mem's */
	uint64_t size;
	struct tracker *tracker;  /* coverage, or NULL when not tracked */
	size_t mem_cap;           /* --snapshot-pool: a snapshot's extra memory at most */
	uint64_t region_size;
	struct snap_tuning tune;  /* set before the first snapshot */
	struct snap_request def;  /* what a request gets for what it does not name */
	struct snap_mode mode;    /* the running snapshot's, resolved once (engine_start.c) */
	struct snap_image_dir image_dirs[SNAP_MAX_IMAGE_DIRS];
	int n_image_dirs;
	void (*on_done)(void *ctx);
	void *on_done_ctx;
	void (*on_compacted)(void *ctx); /* under lock */
	void *on_compacted_ctx;
	struct compactor compactor; /* images compacted in idle time, after their snapshot */
	bool compact_due;         /* the running snapshot's image is the compactor's after */

	pthread_mutex_t lock;     /* guards the fields up to the stages */
	bool busy;                /* one snapshot at a time */
	bool stopping;
	uint64_t next_id;
	struct snap_figures cur;  /* the running (or last finished) snapshot */
	enum snap_policy policy;
	uint64_t t_start_ns;
	double last_end_s;        /* when the last snapshot finished (mono_s), 0: none yet */
	uint64_t periodic_n;      /* periodic snapshots started */

	/* The stages. */
	struct snap_ptab pt;
	struct snap_plan plan;
	struct snap_track track;
	struct pool pool;         /* copies held for the writer, kept across snapshots */
	struct snap_cow cow;
	struct snap_squeeze sq;
	struct snap_writer wr;
	struct snap_fork fork;
	struct snap_observe obs;
	struct snap_rounds rounds;
	struct snap_request rounds_req; /* --precopy rounds: the request, for its thread */
	bool auto_rounds;         /* ...and auto chose them for it */
	bool auto_dense;          /* auto: rounds did not converge; eager until sparse */
	struct img_writer *img;   /* the running snapshot's image */
	struct codec_auto cauto;  /* auto's place and disk rate, kept from snapshot to snapshot */
	pthread_t bg;             /* the writer thread, or the fork's waiter */
	bool bg_joinable;
	bool threads_live;        /* cow: faults may still be served for this snapshot */
};

/* The engine in place (tests, engine-bench's own struct): 0 or -errno. */
int snap_engine_init(struct snap_engine *e, const struct snap_target *t,
		     const struct snap_config *cfg);
void snap_engine_fini(struct snap_engine *e);

/* A failure of the running snapshot: the first one is its error. */
void snap_fail(struct snap_engine *e, int rc, const char *what);

/* engine_state.c: the target's state captured in the pause (0 or -errno); and what
 * its capture_live left for later, added (@rc 0) or given up, once: @rc, or the
 * error adding it gave. */
int snap_capture(struct snap_engine *e, const struct snap_request *req);
int snap_finish_live(struct snap_engine *e, int rc);

/* The fork policy's end (forkpol.c calls it from its waiter). */
void snap_fork_done(void *ctx, int rc, const char *what);

/* The stages' counters of the running snapshot into @f (figures.c). */
void snap_figures_collect(struct snap_engine *e, struct snap_figures *f);
/* engine.c: the steps every mode takes, in e->mode's way (engine_start.c and
 * engine_rounds.c call them; they call no mode).
 * - reserve: claim the engine, -EBUSY with a message when one runs or the target
 *   refuses;
 * - create: the image file, and for the first cow or ccow snapshot the write protection
 *   and its threads (0, or -errno with the image given up and a message);
 * - instant: the pause, the capture and the arming: 0 with the writers paused, or -errno
 *   with them running again, the image given up and a message in @err;
 * - resume: the pause's end for cow and ccow, faults served from now on;
 * - the writer's thread body; unprotect after a failure;
 * - finish: sections, fsync, rename, figures, or the temporary removed;
 * - release the tracker, join the last snapshot's thread. */
int snap_reserve(struct snap_engine *e, const struct snap_request *req, char *err,
		 size_t errlen);
int snap_create(struct snap_engine *e, const struct snap_request *req, char *err,
		size_t errlen);
int snap_instant(struct snap_engine *e, const struct snap_request *req, char *err,
		 size_t errlen);
void snap_resume_live(struct snap_engine *e);
void *snap_writer_thread(void *arg);
void snap_unprotect_failed(struct snap_engine *e);
void snap_finish(struct snap_engine *e, int rc);
void engine_release(struct snap_engine *e);
void engine_join(struct snap_engine *e);

/* engine_rounds.c: the pre-copy a ccow request gets (auto and rounds resolved, the
 * figures told), before its mode is; and the rounds mode's thread started, once the
 * snapshot is created. */
void snap_precopy_resolve(struct snap_engine *e, struct snap_request *req);
/* auto's choice, with @hot of the @present pages that hold data in hot regions, and
 * *@dense set when rounds it chose last did not converge (cleared here once the hot
 * regions say the writes are sparse): NULL for rounds, else why eager. */
const char *snap_auto_choice(uint64_t hot, uint64_t present, bool *dense);
int snap_rounds_start(struct snap_engine *e, const struct snap_request *req, char *err,
		      size_t errlen);

/* The figures of the snapshot ending now into e->cur (the engine's lock held). */
void snap_figures_final(struct snap_engine *e);
/* Fork: the child wrote the image, so its sizes are read back from it. */
void snap_figures_stored(struct snap_engine *e);

#endif
