/*
 * compactor.h - images compacted in idle time (--snapshot-compact idle): one thread,
 * under SCHED_IDLE, rewrites each image a snapshot finished as `ccvm compact` does,
 * holding still while a snapshot or a migration runs, and while the guest works
 * (snapshot/compactor.c).
 */
#ifndef CCVM_COMPACTOR_H
#define CCVM_COMPACTOR_H

#include "../base/worker.h"

#include <stdbool.h>
#include <stdint.h>

#define COMPACTOR_QUEUE 8 /* images waiting; past it the oldest is dropped (left as it is) */
/* The guest works when its threads took more than this share of a core since the last
 * look: any CPU the compactor takes then, however low its priority, moved Redis' p99.9
 * by ~1.8x on our hosts (docs/evaluation.md, "Idle-priority CPU alone"), while an idle
 * guest's timers take well under 1%. */
#define COMPACTOR_GUEST_BUSY 0.2
#define COMPACTOR_LOOK_NS (50 * 1000000ULL)  /* between two looks while compacting */
#define COMPACTOR_REST_NS (200 * 1000000ULL) /* a look's span while the guest works, and
					     * before each image's first chunk */

/* What the compactor did since it started, and what it does now. */
struct compactor_figures {
	uint64_t images;            /* compacted */
	uint64_t failed;            /* given up (damaged, removed or replaced meanwhile) */
	uint64_t bytes_in, bytes_out; /* on disk, before and after, of those compacted */
	bool running;               /* an image is being compacted (held or not) */
	bool held;                  /* and a snapshot or a migration holds it */
	bool guest_busy;            /* or it waits for a span of the guest's rest */
	uint64_t waiting;           /* images queued behind it */
	uint64_t dropped;           /* left uncompacted: the queue was full */
	uint64_t cpu_ns;            /* the CPU time its thread took, waits and looks included */
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
	/* The CPU time the guest's threads took so far (NULL: not known, no waiting), and
	 * the last look at it: from the compactor's thread only. */
	uint64_t (*guest_cpu_ns)(void *ctx);
	void *guest_ctx;
	uint64_t look_ns, look_cpu;
	bool resting;               /* waits for a look spanning COMPACTOR_REST_NS */
	void (*done)(void *ctx);    /* called from its thread after each image */
	void *ctx;
};

/* A compactor making zstd frames at @level, its thread @nice levels down and, with
 * @idle, under SCHED_IDLE; @done (may be NULL) told after each image. Its thread
 * starts with the first image. */
void compactor_init(struct compactor *c, int level, int nice, bool idle,
		    void (*done)(void *ctx), void *ctx);
/* Before its thread starts: compact only while the guest rests, as @cpu_ns(@ctx) (the
 * CPU time its threads took so far, never going back) tells. */
void compactor_watch(struct compactor *c, uint64_t (*cpu_ns)(void *ctx), void *ctx);
/* Give up the image being compacted (left as it was), drop the queue, join; its
 * figures stay readable until compactor_fini, which stops it first if need be. */
void compactor_stop(struct compactor *c);
void compactor_fini(struct compactor *c);

/* Queue the image at @path (copied). 0, -ENOMEM or -EAGAIN (no thread). */
int compactor_add(struct compactor *c, const char *path);

/* A snapshot or a migration starts (@on) or ends: while any runs, compaction holds
 * still between two chunks, as it does while the guest works (compactor_watch). */
void compactor_hold(struct compactor *c, bool on);

void compactor_figures(struct compactor *c, struct compactor_figures *out);
/* The last image finished with: false when none yet. */
bool compactor_last(struct compactor *c, struct compactor_result *out);

#endif
