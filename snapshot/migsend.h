/*
 * migsend.h - a migration's memory, sent while its writers run (migsend.c): pre-copy
 * rounds over a dirty log into a migration stream, then in the pause what is left.
 * On any memory with a dirty log: a VM's RAM (vmm/migrate.c) or plain memory with
 * host threads writing it (the unit tests, engine-bench).
 */
#ifndef CCVM_MIGSEND_H
#define CCVM_MIGSEND_H

#include "migstream.h"
#include "precopy.h"

#include <stdbool.h>
#include <stdint.h>

/* Where a pre-copy stands, after each round's harvest (the progress events). */
struct mig_progress {
	uint64_t round;             /* the round about to start (1: the first after round 0) */
	uint64_t bytes_sent;        /* on the wire so far */
	uint64_t dirty_pages;       /* the pause would send now: written since their last
				     * copy, and the hot ones deferred to it */
	uint64_t dirty_rate;        /* bytes/s of pages newly written in the last round
				     * (deferred hot pages are not watched) */
	uint64_t expected_downtime_ms; /* to send those in the pause, at the pace so far */
};

struct mig_precopy_opts {
	bool coverage;              /* cold regions first, hot pages deferred (else plain) */
	unsigned max_rounds;        /* 0: the rounds' own limit */
	uint64_t bandwidth;         /* bytes/s; 0: as fast as it goes */
	void (*progress)(void *ctx, const struct mig_progress *p);
	void *ctx;
};

struct mig_precopy {
	struct snap_rounds r;
	struct mig_out *o;
	struct mig_precopy_opts opts;
	uint32_t *order;            /* round 0's regions, coldest first */
	uint64_t *left;             /* the pause's pages */
	uint64_t pages_paused;      /* how many it sent */
};

/* Over @mem, written by whoever @log sees; @tracker (NULL: none) ranks regions and
 * pages. Frames go to @o. 0 or -ENOMEM. */
int mig_precopy_init(struct mig_precopy *p, struct gmem *mem, struct tracker *tracker,
		     const struct tracker_log *log, struct mig_out *o,
		     const struct mig_precopy_opts *opts);
void mig_precopy_fini(struct mig_precopy *p);

/* The rounds, while the writers run (@w pauses them once at the start): 0 once what is
 * left fits @downtime_ns or stops shrinking; -ECANCELED when *@stop turns; -errno. The
 * log stays on until mig_precopy_end. */
int mig_precopy_rounds(struct mig_precopy *p, const struct rounds_writers *w,
		       uint64_t downtime_ns, const bool *stop);

/* In the pause: every page the destination may not have as it is now. 0 or -errno. */
int mig_precopy_rest(struct mig_precopy *p);

/* Stop and copy, in the pause: every page of [mem, mem + size) that holds data (zero
 * pages among them as holes); the others are left out, as the destination's fresh
 * memory reads zero there already. 0 or -errno. */
int mig_send_resident(struct mig_out *o, const uint8_t *mem, uint64_t size);

/*
 * mig_postcopy_push - post-copy on the source, the VM paused, its state and the
 * POSTCOPY frame sent: the pages set in @need (a bit per page of @mem) go to the
 * destination, blocks it asks for first, the rest by @p's region order reversed (hot
 * regions first; @p NULL: address order), then END; its answers are read meanwhile.
 * 0 once it said RUNNING and DONE (every page in); -EPROTO for REFUSED, with why in
 * @why; -errno. @st says how far it came.
 */
struct mig_push_state {
	bool running;            /* RUNNING came: after it, a failure loses the VM */
	uint64_t t_running_ns;   /* when (CLOCK_MONOTONIC) */
	uint64_t requests;       /* blocks the destination asked for */
	/* Called as RUNNING comes: what the source lets go of then (may be NULL). */
	void (*on_running)(void *ctx);
	void *ctx;
};
int mig_postcopy_push(struct mig_out *o, const uint8_t *mem, uint64_t *need,
		      const struct mig_precopy *p, struct mig_push_state *st,
		      char why[MIG_WHY_MAX]);

/* A bit in @bits for each page of [mem, mem + size) that holds data. 0 or -errno. */
int mig_resident_bitmap(const uint8_t *mem, uint64_t size, uint64_t *bits);

/* Logging and marks off. */
void mig_precopy_end(struct mig_precopy *p);

#endif
