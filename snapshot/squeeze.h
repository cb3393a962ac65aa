/*
 * squeeze.h - copies held for the writer, compressed in the background when they fill
 * the pool (squeeze.c).
 */
#ifndef CCVM_SQUEEZE_H
#define CCVM_SQUEEZE_H

#include "image.h"
#include "plan.h"
#include "pool.h"
#include "ptab.h"
#include "wqueue.h"
#include "../base/worker.h"

#include <stdbool.h>
#include <stdint.h>

/* Held copies are compressed once they fill more than 1/SQ_PRESSURE_DIV of the pool. */
#define SQ_PRESSURE_DIV 2

struct sq_pack;
struct sq_digest;

/* What the running snapshot tells the squeezer in its pause. */
struct squeeze_job {
	enum img_codec codec;     /* the image's: a chunk packed whole is its frame */
	int level;
	bool incremental;         /* (then no chunk is packed whole) */
	struct img_writer *img;
	const uint64_t *write_at; /* the writer's place in the plan's order */
};

/*
 * Per chunk, sq_state decides who touches its copies (the squeezer or the writer, by
 * compare-and-swap); packs and digests of a chunk belong to whoever holds it.
 */
struct snap_squeeze {
	struct snap_ptab *pt;
	struct pool *pool;
	const struct snap_plan *pl;
	uint64_t size;
	uint64_t span;            /* bytes per pack: a chunk, or a pool slot if smaller */
	uint8_t *state;           /* per chunk: enum sq_state */
	struct sq_pack *packs;    /* per span */
	struct sq_digest *digests; /* per chunk: of one packed whole */
	uint8_t *arena;           /* the arena slot packs go to now, or NULL */
	size_t arena_used;        /* its pages taken */
	enum img_codec codec;
	int level;
	bool incremental;
	struct img_writer *img;
	const uint64_t *write_at;
	uint64_t compressed_bytes; /* bytes of copies compressed by this snapshot */
	struct worker w;          /* wanted between squeeze_begin and squeeze_end */
	int nice;
	bool idle;               /* SCHED_IDLE as well (snap_tuning.background_idle) */
};

/* Per chunk tables for @size bytes, packs in @pool: 0 or -ENOMEM. */
int squeeze_init(struct snap_squeeze *q, struct snap_ptab *pt, struct pool *pool,
		 const struct snap_plan *pl, uint64_t size);
void squeeze_fini(struct snap_squeeze *q);

/* The squeezer thread, at @nice levels below the process and with @idle SCHED_IDLE
 * (the writer's settings: it does the writer's work early). It works between
 * squeeze_begin and squeeze_end. */
int squeeze_thread_start(struct snap_squeeze *q, int nice, bool idle);
void squeeze_thread_stop(struct snap_squeeze *q);

/* In the pause: nothing packed, no chunk written yet, and what this snapshot is. */
void squeeze_plan(struct snap_squeeze *q, const struct squeeze_job *job);

/* After the resume, and once the writer is done (squeeze_end waits until the squeezer
 * is off every chunk). */
void squeeze_begin(struct snap_squeeze *q);
void squeeze_end(struct snap_squeeze *q);

/* The writer is about to stage chunk @c: wait until the squeezer is not on it, and
 * keep it off for good. */
void squeeze_claim(struct snap_squeeze *q, uint64_t c);

/* Once the writer staged chunk @c in @ch (what it took from memory and copies): its
 * PS_PACKED pages, then SAVED, their packs back to the pool. 1 when the chunk was
 * packed whole and its frame is in @ch, prepared for the image (*@zero: its holes);
 * 0 when their bytes are in @ch->buf, to be prepared as any chunk's; -EIO when a pack
 * does not hold what was packed (a bug: packs are monitor memory), -ENOMEM. */
int squeeze_unpack(struct snap_squeeze *q, uint64_t c, struct wq_chunk *ch, uint64_t *zero);

/* After a failed snapshot (the writer and the squeezer stopped): every pack is
 * dropped, its pages SAVED. */
void squeeze_reclaim(struct snap_squeeze *q);

#endif
