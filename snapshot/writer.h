/*
 * writer.h - the stage that saves memory into the image (writer.c): chunk by chunk in
 * the plan's order, staged and handed to the I/O threads (wqueue.c), which compress
 * and write them.
 */
#ifndef CCVM_WRITER_H
#define CCVM_WRITER_H

#include "image.h"
#include "plan.h"
#include "ptab.h"
#include "squeeze.h"
#include "wqueue.h"
#include "../mmu/tracker.h"
#include "../mmu/uffd.h"

#include <stdbool.h>
#include <stdint.h>

/* What the running snapshot tells the writer in its pause. */
struct writer_job {
	struct img_writer *img;
	int threads;              /* I/O threads */
	uint64_t rate;            /* bytes/s, 0: unlimited */
	uint64_t t_start_ns;      /* when the snapshot started (mono_ns), for the rate */
	bool keep_protected;      /* tracked: saved pages stay write-protected */
};

/*
 * The writer is one thread at a time (the engine's writer thread, or the pause); its
 * fields are its own. The counters are atomic: faults save pages through
 * writer_save_page too.
 */
struct snap_writer {
	uint8_t *host;
	uint64_t size;
	struct snap_ptab *pt;
	const struct snap_plan *pl;
	struct snap_squeeze *sq;
	struct uffd *wp;
	struct tracker *tracker;  /* the guest's progress, when tracked; or NULL */
	const bool *stopping;     /* the engine's: a snapshot cut short */
	struct wqueue wq;
	struct writer_job job;
	uint64_t write_at;        /* its place in the plan's order */
	uint64_t pages_saved, pages_zero;
};

int writer_init(struct snap_writer *w, uint8_t *host, uint64_t size, struct snap_ptab *pt,
		const struct snap_plan *pl, struct snap_squeeze *sq, struct uffd *wp,
		struct tracker *tracker, const bool *stopping);
void writer_fini(struct snap_writer *w);

/* In the pause: what this snapshot writes, and from the plan's start. */
void writer_plan(struct snap_writer *w, const struct writer_job *job);

/* Save page @p from @data (NULL or all zero: a hole) straight to the image. */
int writer_save_page(struct snap_writer *w, uint64_t p, const uint8_t *data);

/* cow, ccow: every page still owed to the image, chunk by chunk in the plan's order,
 * while the guest runs; then every write done. 0, -ECANCELED or the first -errno. */
int writer_run(struct snap_writer *w);

/* stop: all of memory, while paused. 0, -ECANCELED or the first -errno. */
int writer_run_paused(struct snap_writer *w);

/* Sleep as needed to keep to the job's rate, @bytes written since it started. */
void writer_throttle(const struct snap_writer *w, uint64_t bytes);

/* The guest's progress count (mmu/tracker.h), which times what a snapshot sees. */
uint64_t writer_progress(const struct snap_writer *w);

#endif
