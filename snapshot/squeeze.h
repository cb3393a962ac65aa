/*
 * squeeze.h - copies held for the writer, compressed in the background when they fill
 * the pool (snapshot/squeeze.c). Internal to the engine.
 */
#ifndef CCVM_SQUEEZE_H
#define CCVM_SQUEEZE_H

#include "engine.h"

/* Held copies are compressed once they fill more than 1/SQ_PRESSURE_DIV of the pool. */
#define SQ_PRESSURE_DIV 2

/* Per chunk tables, sized for the engine's memory. Returns 0 or -ENOMEM. */
int squeeze_init(struct snap_engine *e);
void squeeze_fini(struct snap_engine *e);

/* The squeezer thread, started and stopped with the copy-on-write threads. It works
 * while e->copy_wanted is set (it waits on the copier's condition variable). */
int squeeze_thread_start(struct snap_engine *e);
void squeeze_thread_stop(struct snap_engine *e);

/* In the pause: nothing packed, no chunk written yet. */
void squeeze_plan(struct snap_engine *e);

/* The writer is about to stage chunk @c: wait until the squeezer is not on it, and
 * keep it off for good. */
void squeeze_claim(struct snap_engine *e, uint64_t c);

/* Once the writer staged chunk @c in @ch (what it took from memory and copies): its
 * PS_PACKED pages, then SAVED, their packs back to the pool. 1 when the chunk was
 * packed whole and its frame is in @ch, prepared for the image (*@zero: its holes);
 * 0 when their bytes are in @ch->buf, to be prepared as any chunk's; -EIO when a pack
 * does not hold what was packed (a bug: packs are monitor memory), -ENOMEM. */
int squeeze_unpack(struct snap_engine *e, uint64_t c, struct wq_chunk *ch, uint64_t *zero);

/* After a failed snapshot (the writer and the squeezer stopped): every pack is
 * dropped, its pages SAVED. */
void squeeze_reclaim(struct snap_engine *e);

#endif
