/*
 * cow.h - the copy-on-write data path of snapshot/engine.c (snapshot/cow.c): fault
 * threads, region and page copies, the background copier and the pool it keeps.
 * Internal to the engine.
 */
#ifndef CCVM_COW_H
#define CCVM_COW_H

#include "engine.h"

/* Start the fault threads and the copier once (the write protection is open). */
int cow_threads_start(struct snap_engine *e);
/* Stop and join them (the engine is going away). */
void cow_threads_stop(struct snap_engine *e);

/* Before the pause: fault in what the snapshot will need if the pool is cold (the
 * first snapshot, or the first after the pool was given back), for at most
 * POOL_PREPARE_MAX_S; the copier does the rest while the snapshot runs. */
void cow_pool_prepare(struct snap_engine *e, const struct snap_request *req);
/* While paused: size the pool for this snapshot and hand it out afresh. */
void cow_pool_plan(struct snap_engine *e);
/* After the resume: the copier starts on the hot regions. */
void cow_copy_begin(struct snap_engine *e);
/* When the writer has saved everything: the copier stops and every fault being
 * served has been; no page is left half saved. */
void cow_copy_end(struct snap_engine *e);

/* The guest (or the monitor) wants to write page @p: keep its old contents, and with
 * @wake let the write proceed. */
void cow_page(struct snap_engine *e, uint64_t p, bool wake);

/* While paused (--precopy eager): copy hot region @r, not yet protected, to the
 * pool (true also when it holds nothing to copy); false when the pool has no slot to
 * spare. */
bool cow_copy_eager(struct snap_engine *e, uint64_t r);

/* Lower the calling thread's priority by @n nice levels. */
void cow_nice(int n);

/* Save page @p to the image from @data (NULL or all zero: a hole). */
int snap_save(struct snap_engine *e, uint64_t p, const uint8_t *data);
void snap_fail(struct snap_engine *e, int rc, const char *what);

#endif
