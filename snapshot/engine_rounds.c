/*
 * engine_rounds.c - the engine's side of --precopy auto and rounds (the rounds
 * themselves are precopy.c): which pre-copy a request gets, and the rounds mode, whose
 * thread runs the rounds and then engine.c's steps: the instant, the resume and the
 * writer. It calls the steps; they never call it (the pause arms what the rounds left
 * by the mode alone, engine.c).
 */
#include "engine_impl.h"
#include "image.h"
#include "../mmu/resident.h"
#include "../base/log.h"
#include "../base/mono.h"
#include "../base/pages.h"
#include "../base/role.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void snap_count_run(void *ctx, uint64_t first, uint64_t n)
{
	(void)first;
	*(uint64_t *)ctx += n;
}

/* auto takes eager when hot regions hold more than this share of the memory that holds
 * data. Dense writers show all of it (zipfbench on 256 MiB: 100%); Redis shows 0-10%
 * while serving, but up to 60% when the tracker's last window fell in its load phase. */
#define AUTO_EAGER_NUM 3
#define AUTO_EAGER_DEN 4
/* A quarter or less (or no data at all): the writes are sparse, rounds again, even
 * after rounds that did not converge. */
#define AUTO_SPARSE_DEN 4

/* The budgeted tracker learns a region a window, so a dense writer's share of hot
 * memory reads anywhere from a third to all of it (zipfbench in the model: 43-95 of 128
 * regions), and auto fell back and forth between rounds and eager. Rounds that do
 * not converge are the sign the share misses: the guest rewrites memory faster than
 * rounds copy it, each round is a dirty-log fault on every page it rewrites, and the
 * pause is left more than its budget. Eager then, until the share says sparse; Redis,
 * whose rounds converge (40 of 41 in VMs took no fault), keeps rounds. */
const char *snap_auto_choice(uint64_t hot, uint64_t present, bool *dense)
{
	if (AUTO_EAGER_DEN * hot > AUTO_EAGER_NUM * present)
		return "hot regions hold three quarters of memory";
	if (AUTO_SPARSE_DEN * hot <= present)
		*dense = false;
	return *dense ? "the last pre-copy rounds did not converge" : NULL;
}

/* The pre-copy a ccow request gets: auto is rounds unless hot regions hold three
 * quarters of the memory that holds data (dense writes, which eager copies whole by
 * region), for a page a round watches costs one dirty-log fault where scattered writes
 * would trap on every page they write; or after rounds that did not converge
 * (snap_auto_choice).
 * Rounds where they cannot run (no dirty log of the memory; an incremental snapshot,
 * or writes tracked for one) copy in the pause instead, as eager does. The figures
 * say which ran. */
void snap_precopy_resolve(struct snap_engine *e, struct snap_request *req)
{
	const char *why = rounds_refusal(&e->rounds);
	enum snap_precopy was = req->precopy;

	if (req->policy != SNAP_CCOW || (was != SNAP_PRECOPY_ROUNDS && was != SNAP_PRECOPY_AUTO))
		return;
	if (!why && (req->parent || req->track || e->track.tracking))
		why = "incremental snapshots take their pages in the pause";
	if (!why && was == SNAP_PRECOPY_AUTO) {
		uint64_t present = 0;

		plan_make(&e->plan, e->tracker, SNAP_CCOW, req->threshold, req->order);
		resident_scan(e->host, e->size, snap_count_run, &present);
		why = snap_auto_choice(e->plan.regions_hot * (e->region_size / PAGE_SIZE),
				       present, &e->auto_dense);
	}
	req->precopy = why ? SNAP_PRECOPY_EAGER : SNAP_PRECOPY_ROUNDS;
	e->auto_rounds = !why && was == SNAP_PRECOPY_AUTO;
	if (why && was == SNAP_PRECOPY_ROUNDS)
		log_info("snapshot %llu: --precopy rounds is not for it (%s): eager instead",
			 (unsigned long long)e->cur.id, why);
	pthread_mutex_lock(&e->lock);
	e->cur.precopy = req->precopy;
	pthread_mutex_unlock(&e->lock);
}

static int snap_rounds_sink(void *ctx, uint64_t pfn, const void *data, uint64_t n)
{
	return img_precopy_pages(ctx, pfn, data, n);
}

static int snap_rounds_first_done(void *ctx)
{
	return img_precopy_first_done(ctx);
}

/* --precopy rounds, on the engine's thread: the rounds, the pause, then the writer for
 * what the pause left. A failure ends the snapshot here, as the writer's would. */
static void *snap_rounds_thread(void *arg)
{
	struct snap_engine *e = arg;
	const struct snap_request *req = &e->rounds_req;
	uint64_t t0 = mono_ns();
	char err[256] = "";
	int rc;

	/* Until the instant it does what starting a snapshot does (the dirty log, the
	 * pause, the capture); then it is the writer, whose role it enters then. */
	role_enter(ROLE_CONTROL);
	worker_background(e->tune.writer_nice, e->tune.background_idle);
	tracker_hold(e->tracker, true);
	e->rounds.page_ns = e->cow.page_ns;
	e->rounds.rate = req->rate;
	e->rounds.may_give_up = e->auto_rounds; /* (asked for by name, rounds run whole) */
	rc = rounds_run(&e->rounds, &(struct rounds_sink){ .pages = snap_rounds_sink,
							   .first_done = snap_rounds_first_done,
							   .ctx = e->img },
			&(struct rounds_writers){ .pause = e->t.ops->pause, .resume = e->t.ops->resume,
						  .ctx = e->t.ctx },
			(uint64_t)(req->pause_budget_ms * 1e6), &e->stopping);
	pthread_mutex_lock(&e->lock);
	e->cur.rounds = e->rounds.rounds;
	e->cur.pages_presaved = e->rounds.pages_sent;
	e->cur.presave_ms = (mono_ns() - t0) / 1000000ULL;
	e->cur.rounds_gave_up = e->rounds.gave_up;
	pthread_mutex_unlock(&e->lock);
	if (!rc && e->auto_rounds && !e->rounds.converged) {
		if (e->rounds.gave_up)
			log_debug("snapshot %llu: the guest wrote again more than a quarter of what "
				  "round 0 watched: no more rounds, the pause takes the rest, and "
				  "auto takes eager next", (unsigned long long)e->cur.id);
		else
			log_debug("snapshot %llu: its rounds did not converge: auto takes eager next",
				  (unsigned long long)e->cur.id);
		e->auto_dense = true;
	}
	if (rc) {
		snprintf(err, sizeof(err), "%s", rc == -ECANCELED ? "cancelled" : "pre-copy rounds");
	} else {
		/* From the instant the snapshot's I/O threads write what is left (all of it
		 * past where round 0 gave up): auto weighs their overlap again. */
		cauto_begin(&e->cauto, req->threads);
		rc = snap_instant(e, req, err, sizeof(err));
	}
	if (!rc)
		snap_resume_live(e);
	rounds_end(&e->rounds);
	if (rc) {
		snap_fail(e, rc, err);
		snap_finish(e, rc);
		engine_release(e);
		return NULL;
	}
	return snap_writer_thread(e);
}

/* --precopy rounds: prepared; its thread does the rest, and snap_start returns. */
int snap_rounds_start(struct snap_engine *e, const struct snap_request *req, char *err,
			     size_t errlen)
{
	int rc = img_precopy_begin(e->img);

	/* Round 0 compresses and writes on this one thread: nothing overlaps, so auto
	 * compresses when the write time it saves exceeds its own (codec_auto.c). */
	cauto_begin(&e->cauto, 1);
	e->rounds_req = *req;
	e->rounds_req.file = e->cur.file;
	engine_join(e);
	if (!rc) {
		e->bg_joinable = true;
		if (pthread_create(&e->bg, NULL, snap_rounds_thread, e)) {
			e->bg_joinable = false;
			rc = -EAGAIN;
		}
	}
	if (rc) {
		snprintf(err, errlen, "cannot start the snapshot: %s", strerror(-rc));
		img_abort(e->img);
		e->img = NULL;
	}
	return rc;
}
