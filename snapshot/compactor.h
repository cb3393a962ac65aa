/*
 * compactor.h - images compacted in idle time (--snapshot-compact idle): one thread,
 * under SCHED_IDLE, rewrites each image a snapshot finished as `ccvm compact` does,
 * holding still while a snapshot or a migration runs (snapshot/compactor.c).
 */
#ifndef CCVM_COMPACTOR_H
#define CCVM_COMPACTOR_H

#include "../base/worker.h"

#include <stdbool.h>
#include <stdint.h>

#define COMPACTOR_QUEUE 8 /* images waiting; past it the oldest is dropped (left as it is) */

/* What the compactor did since it started, and what it does now. */
struct compactor_figures {
	uint64_t images;            /* compacted */
	uint64_t failed;            /* given up (damaged, removed or replaced meanwhile) */
	uint64_t bytes_in, bytes_out; /* on disk, before and after, of those compacted */
	bool running;               /* an image is being compacted (held or not) */
	bool held;                  /* and a snapshot or a migration holds it */
	uint64_t waiting;           /* images queued behind it */
	uint64_t dropped;           /* left uncompacted: the queue was full */
};

/* The last image it finished with: for the event that tells it. */
struct compactor_result {
	char file[4096];
	bool ok;
	char error[512];
	uint64_t bytes_in, bytes_out, ms;
};

struct compactor {
	struct worker w;            /* lock, condition, thread, stop */
	char *queue[COMPACTOR_QUEUE]; /* under w.lock: oldest first */
	int n;
	int holds;                  /* under w.lock: snapshots and migrations running */
	struct compactor_figures fig; /* under w.lock */
	struct compactor_result last; /* under w.lock */
	int level, nice;
	bool idle;
	void (*done)(void *ctx);    /* called from its thread after each image */
	void *ctx;
};

/* A compactor making zstd frames at @level, its thread @nice levels down and, with
 * @idle, under SCHED_IDLE; @done (may be NULL) told after each image. Its thread
 * starts with the first image. */
void compactor_init(struct compactor *c, int level, int nice, bool idle,
		    void (*done)(void *ctx), void *ctx);
/* Give up the image being compacted (left as it was), drop the queue, join; its
 * figures stay readable until compactor_fini, which stops it first if need be. */
void compactor_stop(struct compactor *c);
void compactor_fini(struct compactor *c);

/* Queue the image at @path (copied). 0, -ENOMEM or -EAGAIN (no thread). */
int compactor_add(struct compactor *c, const char *path);

/* A snapshot or a migration starts (@on) or ends: while any runs, compaction holds
 * still between two chunks. */
void compactor_hold(struct compactor *c, bool on);

void compactor_figures(struct compactor *c, struct compactor_figures *out);
/* The last image finished with: false when none yet. */
bool compactor_last(struct compactor *c, struct compactor_result *out);

#endif
