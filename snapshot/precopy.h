/*
 * precopy.h - --precopy rounds: memory written into the image before the snapshot's
 * instant while its writers keep running, again for what they rewrite, until what is
 * left fits the pause (precopy.c). Live migration's pre-copy, aimed at a file, or at a
 * migration stream (migsend.c).
 */
#ifndef CCVM_PRECOPY_H
#define CCVM_PRECOPY_H

#include "ptab.h"
#include "../mmu/gmem.h"
#include "../mmu/tracker.h"

#include <stdbool.h>
#include <stdint.h>

struct img_writer;
struct snap_rounds;

/* How the rounds stop whoever writes the memory once, when the marks start (the
 * engine passes its target's pause and resume). */
struct rounds_writers {
	int (*pause)(void *ctx);
	void (*resume)(void *ctx);
	void *ctx;
};

/* Where the rounds' pages go: an image (img_precopy_pages), or a migration stream.
 * first_done, when set, is told when round 0 has passed over all of memory (an image
 * stores the chunk it gathered last). 0 or -errno. */
struct rounds_sink {
	int (*pages)(void *ctx, uint64_t pfn, const void *data, uint64_t n);
	int (*first_done)(void *ctx);
	void *ctx;
};

/* Told after each round's harvest: @dirty pages written since their last copy during
 * the @ns since that round began, @left for the pause as things stand (with the
 * deferred ones). A nonzero return stops the rounds with it. */
typedef int (*rounds_hook)(void *ctx, const struct snap_rounds *r, uint64_t dirty,
			   uint64_t left, uint64_t ns);

/* State of the running pre-copy; the bitmaps are kept between snapshots. Used by the
 * one thread that runs the snapshot up to its instant, and by nobody else. */
struct snap_rounds {
	struct gmem *mem;
	struct tracker *tracker; /* its dirty log (KVM's in a VM) and page heat */
	struct tracker_log log;
	uint64_t pages, words;
	uint64_t *dirty;         /* the log's bitmap */
	uint64_t *marks;         /* what the monitor may have written (gmem_mark_start) */
	uint64_t *watched;       /* pages whose writes the log reports (each round's) */
	uint64_t *held;          /* the hottest pages, never watched: left to the pause */
	uint64_t *seen;          /* watched pages the log saw written before the instant */
	uint64_t *prev;          /* defer_hot: what the last harvest found written */
	uint64_t *deferred;      /* defer_hot: written in two harvests running: to the pause */
	uint64_t *pending;       /* defer_hot: hot by the heat, left out of round 0; else
				  * what round 0's look at the log found written again */
	uint32_t *hot;           /* the heat's ranking, for held */
	uint8_t *buf;            /* runs are copied here, then written */
	bool logging, marking;
	bool settled;            /* rounds_settle read the log for this instant */
	/* Figures of the running snapshot. */
	uint64_t rounds, pages_sent, pages_redirtied, n_held;
	bool converged;          /* the last rounds ended with what is left under budget */
	bool gave_up;            /* round 0 was cut short (may_give_up) */
	bool peeked;             /* round 0 has looked at the log (may_give_up) */
	uint64_t pages_left;     /* what the last instant left the pause to copy (kept) */
	uint64_t page_ns;        /* a page copied in the pause, as the last one measured */
	uint64_t rate;           /* bytes/s the rounds may write (the request's; 0: any) */
	uint64_t t_start_ns;     /* when the running rounds began: their pace counts from it */
	uint64_t t_round_ns;     /* when the last round began */
	/* Set by the caller before rounds_run (zero: a snapshot's defaults). */
	const uint32_t *order;   /* round 0 goes region by region in this order ... */
	uint64_t n_order, region_pages; /* ... of this many regions of this many pages */
	unsigned max_rounds;     /* at most this many rounds (0: ROUNDS_MAX) */
	bool learn_page_ns;      /* page_ns as round 0 went (a stream's pace, not memcpy's) */
	bool may_give_up;        /* round 0 stops where the writer has already written
				  * again most of what it sent (rounds_hopeless) */
	bool defer_hot;          /* held pages skip round 0, and a page written in two
				  * harvests running waits for the pause (each round's copy
				  * of it would be stale by the next) */
	rounds_hook on_round;
	void *hook_ctx;
};

/* Over @mem, whose writes @tracker's log reports (none, or no log: no rounds). 0. */
int rounds_init(struct snap_rounds *r, struct gmem *mem, struct tracker *tracker);
void rounds_fini(struct snap_rounds *r);

/* Why @r cannot pre-copy (no dirty log), or NULL. */
const char *rounds_refusal(const struct snap_rounds *r);

/*
 * rounds_run - before the pause: the log and the monitor's marks on, the writers
 * paused once through @w (so that no pointer into memory handed out before the
 * marks is still in use), then every page that holds data into @sink, each piece
 * watched just before it is copied, then the pages written since, round after round,
 * until they would take under a quarter of @budget_ns to copy in the pause, stop
 * shrinking, or ROUNDS_MAX rounds were made. The hottest pages (the heat), as many
 * as a quarter of the budget copies, are never watched: a watched page costs the guest a
 * fault at its next write (~30 us in our VMs), and those would be written again
 * anyway; the pause copies them. Paced at @r->rate bytes/s when set (--rate).
 * With @r->may_give_up, round 0 looks at the log once, and where the writer has
 * already written again most of what it sent, stops there (gave_up, not converged):
 * the pause then takes the rest as a snapshot without rounds does.
 * 0, -ECANCELED when *@stop turns true, or -errno;
 * rounds_end in any case afterwards.
 */
int rounds_run(struct snap_rounds *r, const struct rounds_sink *sink,
	       const struct rounds_writers *w, uint64_t budget_ns, const bool *stop);

/*
 * rounds_left - in the pause, for a copy that is not an image (migration): into @out
 * (one bit per page) every page the destination may not have as it is now: written
 * since its last round (the log, the monitor's marks) or never watched and present
 * now. Pages never watched that hold no data are left out only where round 0 found
 * none either (the destination's are zero too). Returns how many, or -errno.
 */
int64_t rounds_left(struct snap_rounds *r, uint64_t *out);

/*
 * rounds_pause_pages - what the pause after the next rounds is expected to copy, for
 * the pool kept ready: half as much again as the last instant left, and no less than
 * converged rounds may leave (what copies in a quarter of @budget_ns at @page_ns a
 * page). 0 when no instant has told yet.
 */
uint64_t rounds_pause_pages(const struct snap_rounds *r, uint64_t budget_ns, uint64_t page_ns);

/*
 * rounds_settle - first thing in the pause, before the capture streams anything into
 * @img: the log read for the last time, and the slots set aside in @img's patch area
 * for every page that may be recorded after the instant into a framed chunk (written
 * since its last round, never watched, or marked). 0 or -errno.
 */
int rounds_settle(struct snap_rounds *r, struct img_writer *img);

/*
 * rounds_instant - in the pause, once ptab_mark said which pages hold data: each such
 * page not written since its last round stands in @img as written (PS_SAVED); the
 * others stay PS_PROTECTED and are listed in @out (at most @max), for the pause to
 * copy. Returns how many were listed.
 */
uint64_t rounds_instant(struct snap_rounds *r, struct snap_ptab *pt, struct img_writer *img,
			uint32_t *out, uint64_t max);

/* Logging and marks off (after the pause, or after a failure). */
void rounds_end(struct snap_rounds *r);

#endif
