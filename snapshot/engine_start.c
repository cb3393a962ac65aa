/*
 * engine_start.c - a snapshot request checked, resolved once into its mode (request.c's
 * struct snap_mode) and taken through engine.c's steps the way that mode takes them.
 *
 * stop writes in the pause; fork resumes at once and a child writes; cow and ccow
 * resume at once and a thread writes, with faults served meanwhile. --precopy rounds
 * is the mode of its own file (engine_rounds.c), whose thread runs the same steps
 * before and after its pause. Each mode calls the steps; no step calls a mode, so the
 * steps can be read, and tested, as one protocol.
 */
#include "engine_impl.h"
#include "../base/mono.h"

#include <errno.h>
#include <pthread.h>

/* stop: all of memory written while paused, then resume. */
static void snap_write_paused(struct snap_engine *e)
{
	int rc = writer_run_paused(&e->wr);

	if (rc)
		snap_fail(e, rc, rc == -ECANCELED ? "cancelled" : "writing the image");
	e->cur.pause_us = (mono_ns() - e->t_start_ns) / 1000;
	e->t.ops->resume(e->t.ctx);
	snap_finish(e, rc);
	engine_release(e);
}

/* fork: the child writes; resume at once; a thread waits for the child. */
static void snap_write_forked(struct snap_engine *e)
{
	int rc;

	engine_join(e);
	rc = forkpol_start(&e->fork);
	e->cur.pause_us = (mono_ns() - e->t_start_ns) / 1000;
	e->t.ops->resume(e->t.ctx);
	if (!rc && pthread_create(&e->bg, NULL, forkpol_waiter, &e->fork)) {
		forkpol_abandon(&e->fork);
		rc = -EAGAIN;
	}
	if (!rc) {
		e->bg_joinable = true;
		return;
	}
	snap_fork_done(e, rc, "forking the writer");
}

/* cow, ccow: resume at once; the writer thread saves memory in the background. */
static void snap_write_background(struct snap_engine *e)
{
	engine_join(e);
	snap_resume_live(e);
	e->bg_joinable = true;
	if (pthread_create(&e->bg, NULL, snap_writer_thread, e)) {
		e->bg_joinable = false;
		cow_copy_end(&e->cow);
		squeeze_end(&e->sq);
		__atomic_store_n(&e->threads_live, false, __ATOMIC_RELEASE);
		snap_unprotect_failed(e);
		snap_fail(e, -EAGAIN, "starting the writer");
		snap_finish(e, -EAGAIN);
		engine_release(e);
	}
}

/* The modes whose writing starts at the pause (all but rounds): checked, reserved and
 * created, the pause and the instant, then the mode's writing. */
static int snap_run(struct snap_engine *e, const struct snap_request *req, char *err,
		    size_t errlen)
{
	int rc;

	if (e->tracker)
		tracker_hold(e->tracker, true);
	rc = snap_instant(e, req, err, errlen);
	if (rc) {
		engine_release(e);
		return rc;
	}
	if (e->mode.write == SNAP_WRITE_PAUSED)
		snap_write_paused(e);
	else if (e->mode.write == SNAP_WRITE_FORKED)
		snap_write_forked(e);
	else
		snap_write_background(e);
	return 0;
}

int snap_start(struct snap_engine *e, const struct snap_request *request,
	       struct snap_figures *now, char *err, size_t errlen)
{
	struct snap_request copy = *request, *req = &copy;
	int rc = snap_storage_check(req, err, errlen);

	if (!rc)
		rc = snap_reserve(e, req, err, errlen);
	if (rc)
		return rc;
	rc = track_check(&e->track, req, err, errlen);
	if (!rc) {
		snap_precopy_resolve(e, req);
		e->mode = snap_mode_of(req); /* once: the steps read only this */
	}
	if (!rc && e->mode.write == SNAP_WRITE_FORKED) /* before the pause: it walks every mapping */
		forkpol_before(&e->fork);
	if (!rc)
		rc = snap_create(e, req, err, errlen);
	if (!rc)
		rc = e->mode.write == SNAP_WRITE_ROUNDS ? snap_rounds_start(e, req, err, errlen) :
							  snap_run(e, req, err, errlen);
	if (rc) {
		pthread_mutex_lock(&e->lock);
		e->busy = false;
		pthread_mutex_unlock(&e->lock);
		compactor_hold(&e->compactor, false);
		return rc;
	}
	snap_figures_of(e, e->cur.id, now);
	return 0;
}
