/*
 * migrecv.h - post-copy on the destination (migrecv.c): the VM runs while the pages it
 * lacks come over the migration stream, asked for when it touches them, pushed by the
 * source meanwhile.
 */
#ifndef CCVM_MIGRECV_H
#define CCVM_MIGRECV_H

#include "migstream.h"
#include "../mmu/gmem.h"

struct mig_postcopy;

/* What the destination says when the stream fails after the switch (the VM is lost:
 * the source no longer runs it either), from the receiving thread. */
struct mig_postcopy_target {
	struct gmem *mem;
	void (*on_lost)(void *ctx);
	void *ctx;
	bool *filling;           /* turned false (atomically) once every page is in */
};

/*
 * mig_postcopy_start - at the stream's POSTCOPY frame: the pages of @t->mem not in
 * @have (one bit per page, what the stream brought so far), and those in @stale (the
 * frame's bitmap, NULL: none), are dropped and registered with a userfaultfd in
 * missing mode; a thread asks the source for the block of each one touched, another
 * reads the rest of @in (pages and holes installed where missing, up to END). @have
 * is taken over. 0 or -errno.
 */
int mig_postcopy_start(struct mig_in *in, const struct mig_postcopy_target *t, uint64_t *have,
		       const uint64_t *stale, struct mig_postcopy **out);

/* An answer to the source (READY, RUNNING) on the connection the requests share. */
int mig_postcopy_ack(struct mig_postcopy *pc, enum mig_ack_code code);

/* Wait for END and every page (at END the receiving thread unregisters the range and
 * collapses huge pages itself), then free. 0, or -EIO when the stream failed first
 * (on_lost was called). */
int mig_postcopy_finish(struct mig_postcopy *pc);

/* The VM ended: stop reading (the connection shut down), then mig_postcopy_finish. */
void mig_postcopy_abort(struct mig_postcopy *pc);

#endif
