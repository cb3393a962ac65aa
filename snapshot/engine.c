/*
 * engine.c - the snapshot protocol: point-in-time images of a memory range that others
 * keep writing (a VM's RAM through vmm/persist_capture.c; host threads' memory in the
 * tests and bench/engine-bench). Its steps orchestrate; the stages do the work
 * (engine_impl.h lists them).
 *
 * Policy stop (the Firecracker-style baseline): pause, write all of memory, resume.
 * Policy cow: pause, capture the state the target adds, write-protect all memory with
 * userfaultfd, resume (the pause does not depend on memory size), then the writer
 * saves every page in the plan's order while fault threads serve the writes: the first
 * write to a page not yet saved copies its old contents into the pool, lifts the
 * protection and lets the writer go on; the writer later saves the copy. ccow copies
 * hot regions whole. fork: the kernel's copy-on-write in a child. A per-page atomic
 * state (ptab.h) decides who saves each page, exactly once, so the image equals memory
 * at the instant of the pause, whatever is written afterwards. Pages not present at
 * that instant are zero and are saved as holes. Anything that would discard memory
 * behind its writers' back during a snapshot calls snap_before_discard() first.
 *
 * This file holds the steps (reserve, create, the instant, resume, the writer, finish),
 * each doing what the snapshot's mode says (struct snap_mode, resolved once by
 * engine_start.c). The modes call the steps: engine_start.c for stop, fork, cow and
 * ccow, engine_rounds.c for --precopy rounds; a step never calls a mode.
 */
#include "engine_impl.h"
#include "image.h"
#include "../base/log.h"
#include "../base/mono.h"
#include "../base/pages.h"
#include "../base/role.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Wrap up: sections, fsync, rename, figures; or remove the temporary file. */
void snap_finish(struct snap_engine *e, int rc)
{
	rc = snap_finish_live(e, rc);
	if (!rc && e->mode.write == SNAP_WRITE_FORKED) {
		img_forget(e->img); /* the child finished it */
		snap_figures_stored(e);
	} else if (!rc) {
		img_writer_bytes(e->img, &e->cur.bytes_raw, &e->cur.bytes_stored);
		img_writer_mix(e->img, e->cur.codec_chunks);
		rc = img_finish(e->img);
		if (rc)
			snap_fail(e, rc, rc == -ESTALE ?
				  "finishing the image: another file took its temporary name in "
				  "its directory while it was written (something races there)" :
				  "finishing the image");
	} else {
		img_abort(e->img);
	}
	e->img = NULL;
	pthread_mutex_lock(&e->lock);
	snap_figures_final(e);
	/* The span coverage predicts runs from the request: a pre-copy's rounds watch
	 * the guest's writes from then, and whichever pre-copy ran must not make the
	 * next choice lean its way (a short span makes fewer regions hot, and auto then
	 * picks rounds again). */
	if (e->tracker && !rc)
		tracker_snapshot_took(e->tracker,
				      (double)(e->cur.duration_ms + e->cur.presave_ms) / 1000.0);
	e->cur.bytes = rc ? 0 : img_disk_bytes(e->cur.file);
	if (!rc)
		track_done(&e->track, e->cur.file, &e->cow.wp);
	else if (e->track.tracking || e->track.next)
		track_failed(&e->track); /* whatever failed, the pages it took stay written */
	e->cur.ok = !rc;
	e->cur.done = true;
	e->busy = false;
	e->last_end_s = mono_s();
	pthread_mutex_unlock(&e->lock);
	compactor_hold(&e->compactor, false);
	if (!rc && e->compact_due && compactor_add(&e->compactor, e->cur.file))
		log_warn("snapshot %llu: %s will not be compacted (no thread for it)",
			 (unsigned long long)e->cur.id, e->cur.file);
	if (rc)
		log_warn("snapshot %llu to %s failed: %s", (unsigned long long)e->cur.id,
			 e->cur.file, e->cur.error);
	if (e->on_done)
		e->on_done(e->on_done_ctx);
}

/* The snapshot is over: coverage may be measured again. */
void engine_release(struct snap_engine *e)
{
	if (e->tracker)
		tracker_hold(e->tracker, false);
}

/* After a failure: memory must not stay write-protected for this snapshot's sake, and
 * copies never written go back to the pool (or it would shrink with every failure).
 * With tracking, protection stays, but no page is left to copy, and the pages this
 * snapshot took as written stay marked. */
void snap_unprotect_failed(struct snap_engine *e)
{
	if (e->track.tracking || e->track.next)
		track_failed(&e->track);
	else
		uffd_protect(&e->cow.wp, 0, e->size, false);
	cow_reclaim(&e->cow);
	squeeze_reclaim(&e->sq);
}

void *snap_writer_thread(void *arg)
{
	struct snap_engine *e = arg;
	int rc;

	role_enter(ROLE_SNAPSHOT);
	worker_background(e->tune.writer_nice, e->tune.background_idle);
	rc = writer_run(&e->wr);
	cow_copy_end(&e->cow);
	squeeze_end(&e->sq);
	if (rc)
		snap_fail(e, rc, rc == -ECANCELED ? "cancelled" : "writing the image");
	__atomic_store_n(&e->threads_live, false, __ATOMIC_RELEASE);
	/* What a pre-copy's rounds saw written, as faults would have told it. */
	e->obs.also_written = e->cur.rounds ? e->rounds.seen : NULL;
	e->cur.pages_precopied_unwritten =
		observe_snapshot(&e->obs, &e->pt, &e->plan, e->host, writer_progress(&e->wr),
				 e->tracker, !rc);
	if (rc)
		snap_unprotect_failed(e);
	snap_finish(e, rc);
	if (!__atomic_load_n(&e->stopping, __ATOMIC_ACQUIRE))
		ptab_collapse_split(&e->pt, e->t.mem);
	/* Only now may coverage be measured again: while huge pages are put back
	 * together the guest stalls, and a window would take that for running. */
	engine_release(e);
	return NULL;
}

/* Before the pause (none of it needs the writers stopped): create the image file and,
 * for the first cow or ccow snapshot, the write protection and its threads. */
int snap_create(struct snap_engine *e, const struct snap_request *req, char *err,
		size_t errlen)
{
	const struct snap_mode *m = &e->mode;
	struct img_header_info info = { .ram_size = e->size, .policy = req->policy,
					.codec = req->codec, .level = req->level,
					.flags = req->parent ? IMG_FLAG_CHILD : 0 };
	char recorded[IMG_PATH_MAX];
	struct timespec rt;
	int dir, rc;

	clock_gettime(CLOCK_REALTIME, &rt);
	info.created_ns = (uint64_t)rt.tv_sec * 1000000000ULL + (uint64_t)rt.tv_nsec;
	dir = imgdir_open(e->image_dirs, e->n_image_dirs, req->file, err, errlen);
	if (dir < 0)
		return dir;
	rc = img_create_at(dir, req->file, &info, &e->img);
	close(dir);
	if (rc) {
		snprintf(err, errlen, "cannot create the image %s: %s", req->file, strerror(-rc));
		return rc;
	}
	img_writer_auto(e->img, &e->cauto); /* its place carried from one snapshot to the next */
	cauto_begin(&e->cauto, req->threads);
	if (req->parent) {
		rc = track_parent_path(&e->track, req->file, recorded, sizeof(recorded));
		if (!rc)
			rc = img_set_parent(e->img, recorded, e->track.identity);
		if (rc)
			snprintf(err, errlen, "cannot create the image %s: %s", req->file,
				 strerror(-rc));
	}
	if (!rc && m->arm != SNAP_ARM_NONE) {
		/* The cap less the writer's buffers: copies beyond it are saved by the faults
		 * themselves, one page at a time, never with more memory. */
		pool_set_limit(&e->pool, (e->mem_cap > wq_memory(req->threads) ?
					  e->mem_cap - wq_memory(req->threads) : 0) / e->pool.slot_size);
		rc = cow_threads_start(&e->cow);
		if (!rc && e->tune.held_compress &&
		    squeeze_thread_start(&e->sq, e->tune.writer_nice, e->tune.background_idle))
			log_warn("no thread to compress held copies: a full pool falls back to traps");
		if (!rc) {
			plan_make(&e->plan, e->tracker, m->plan, req->threshold, req->order);
			plan_hot_pages(&e->plan, m->pause_copies && m->arm == SNAP_ARM_PROTECT ?
					e->tracker : NULL, pool_cap_pages(&e->pool));
			/* planned again, paused */
			cow_pool_prepare(&e->cow, e->plan.regions_hot, m->pause_copies ?
					 (uint64_t)(req->pause_budget_ms * 1e6) : 0);
			/* (rounds that gave up leave the pause what eager leaves it) */
			if (m->arm == SNAP_ARM_ROUNDS && !e->rounds.gave_up)
				cow_pool_fit(&e->cow, rounds_pause_pages(
						&e->rounds, (uint64_t)(req->pause_budget_ms * 1e6),
						e->cow.page_ns));
		} else {
			snprintf(err, errlen, "cannot start the snapshot: %s", strerror(-rc));
		}
	}
	if (rc) {
		img_abort(e->img);
		e->img = NULL;
	}
	return rc;
}

/* The pause of --precopy rounds: the pages its rounds wrote that still stand are
 * saved; those written since are copied within the budget, and only what is left of
 * them is write-protected. */
static int snap_arm_rounds(struct snap_engine *e, const struct snap_request *req)
{
	uint64_t redirtied;

	e->plan.n_hot_pages = rounds_instant(&e->rounds, &e->pt, e->img, e->plan.hot_pages,
					     e->pt.pages);
	redirtied = e->rounds.pages_redirtied;
	pthread_mutex_lock(&e->lock);
	e->cur.pages_redirtied = redirtied;
	pthread_mutex_unlock(&e->lock);
	e->cow.unprotected = true;
	cow_precopy_eager(&e->cow, e->t_start_ns, (uint64_t)(req->pause_budget_ms * 1e6));
	return cow_protect_rest(&e->cow);
}

/* The pause, for cow and ccow: the pool, write protection, eager copies. */
static int snap_arm(struct snap_engine *e, const struct snap_request *req)
{
	int rc;

	cow_pool_plan(&e->cow, req->policy == SNAP_CCOW);
	squeeze_plan(&e->sq, &(struct squeeze_job){ .codec = req->codec, .level = req->level,
						     .incremental = e->cur.incremental,
						     .img = e->img, .write_at = &e->wr.write_at });
	e->cow.unprotected = false;
	if (e->mode.arm == SNAP_ARM_ROUNDS)
		return snap_arm_rounds(e, req);
	rc = cow_protect(&e->cow);
	if (!rc && e->mode.pause_copies)
		cow_precopy_eager(&e->cow, e->t_start_ns, (uint64_t)(req->pause_budget_ms * 1e6));
	return rc;
}

/* The pause: state, which pages the instant holds, the plan, write protection. */
static int snap_begin(struct snap_engine *e, const struct snap_request *req, char *err,
		      size_t errlen)
{
	uint64_t t0 = mono_ns(), t1, t2;
	int rc;

	e->obs.progress_start = writer_progress(&e->wr); /* paused: it holds still */
	rc = snap_capture(e, req);
	t1 = mono_ns();
	if (!rc)
		rc = ptab_mark(&e->pt, e->host);
	/* In the pause, a pass over every page: only when this snapshot starts or continues
	 * tracking (a snapshot that does neither ends tracking, or fails and leaves the
	 * marks as they are, which only ever adds pages to the next incremental one). */
	e->cur.pages_total = e->pt.pages;
	e->cur.pages_held = e->pt.pages;
	e->cur.incremental = false;
	if (!rc && e->track.next) {
		e->cur.incremental = req->parent != NULL;
		track_instant(&e->track, e->cur.incremental, &e->cur.pages_held,
			      &e->cur.track_faults);
	}
	if (!rc)
		plan_make(&e->plan, e->tracker, e->mode.plan, req->threshold, req->order);
	writer_plan(&e->wr, &(struct writer_job){ .img = e->img, .threads = req->threads,
						  .rate = req->rate, .t_start_ns = e->t_start_ns,
						  .keep_protected = e->track.next ||
								    e->track.tracking });
	t2 = mono_ns();
	if (!rc && e->mode.arm != SNAP_ARM_NONE)
		rc = snap_arm(e, req);
	log_debug("pause parts: pausing %llu us, capture %llu us, mark %llu us, protect %llu us",
		 (unsigned long long)(t0 - e->t_start_ns) / 1000, (unsigned long long)(t1 - t0) / 1000,
		 (unsigned long long)(t2 - t1) / 1000, (unsigned long long)(mono_ns() - t2) / 1000);
	if (rc) {
		snprintf(err, errlen, "cannot start the snapshot: %s", strerror(-rc));
		snap_finish_live(e, rc);
		img_abort(e->img);
		e->img = NULL;
	}
	return rc;
}

void snap_fork_done(void *ctx, int rc, const char *what)
{
	struct snap_engine *e = ctx;

	if (rc)
		snap_fail(e, rc, what);
	snap_finish(e, rc);
	engine_release(e);
}

/* A previous snapshot's thread has finished (busy was cleared at its end). */
void engine_join(struct snap_engine *e)
{
	if (e->bg_joinable)
		pthread_join(e->bg, NULL);
	e->bg_joinable = false;
}

/* Claim the engine for a new snapshot: -EBUSY with a message when one runs, the
 * target is stopping, or it refuses. */
int snap_reserve(struct snap_engine *e, const struct snap_request *req, char *err,
			size_t errlen)
{
	const char *refusal;

	pthread_mutex_lock(&e->lock);
	refusal = e->t.ops->refuse ? e->t.ops->refuse(e->t.ctx) : NULL;
	if (e->busy || e->stopping || refusal) {
		if (refusal)
			snprintf(err, errlen, "%s", refusal);
		else
			snprintf(err, errlen, e->busy ? "snapshot %llu is still running; one at a time" :
							"the VM is stopping",
				 (unsigned long long)e->cur.id);
		pthread_mutex_unlock(&e->lock);
		return -EBUSY;
	}
	e->busy = true;
	memset(&e->cur, 0, sizeof(e->cur));
	memset(&e->cow.n, 0, sizeof(e->cow.n));
	e->cur = (struct snap_figures){ .id = ++e->next_id, .policy = req->policy,
					.threshold = req->threshold, .precopy = req->precopy,
					.region_size = e->region_size, .codec = req->codec,
					.level = req->level, .threads = req->threads };
	e->policy = req->policy;
	snprintf(e->cur.file, sizeof(e->cur.file), "%s", req->file);
	/* A child, or a chain's anchor, names (or is named by) an identity a rewrite
	 * would change: never compacted. */
	e->compact_due = req->compact == SNAP_COMPACT_IDLE && !req->parent && !req->track;
	pthread_mutex_unlock(&e->lock);
	compactor_hold(&e->compactor, true);
	return 0;
}

/* cow, ccow: the pause ends; faults and the copier serve this snapshot from now on. */
void snap_resume_live(struct snap_engine *e)
{
	__atomic_store_n(&e->threads_live, true, __ATOMIC_RELEASE);
	e->cur.pause_us = (mono_ns() - e->t_start_ns) / 1000;
	e->t.ops->resume(e->t.ctx);
	cow_copy_begin(&e->cow);
	squeeze_begin(&e->sq);
}

/* The pause and the instant: 0 with the writers paused, or -errno with them running
 * again, the image given up and a message in @err. */
int snap_instant(struct snap_engine *e, const struct snap_request *req, char *err,
		 size_t errlen)
{
	int rc;

	e->t_start_ns = mono_ns();
	rc = e->t.ops->pause(e->t.ctx);
	if (rc) {
		snprintf(err, errlen, "the VM has stopped");
		img_abort(e->img);
		e->img = NULL;
		return rc;
	}
	/* Rounds: the log's last word, and the image's slots for what the instant leaves,
	 * before the capture streams a section where they would go. */
	if (e->mode.arm == SNAP_ARM_ROUNDS && (rc = rounds_settle(&e->rounds, e->img))) {
		snprintf(err, errlen, "cannot start the snapshot: %s", strerror(-rc));
		img_abort(e->img);
		e->img = NULL;
		e->t.ops->resume(e->t.ctx);
		return rc;
	}
	rc = snap_begin(e, req, err, errlen);
	if (rc) {
		e->t.ops->resume(e->t.ctx);
		return rc;
	}
	if (e->t.ops->at_instant)
		e->t.ops->at_instant(e->t.ctx, req->file);
	return 0;
}
