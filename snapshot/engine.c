/*
 * engine.c - the copy-on-write core of the snapshot engine: point-in-time images of a
 * memory range that others keep writing (a VM's RAM through vmm/persist_capture.c; host threads'
 * memory in the tests and bench/engine-bench). Planning is plan.c's, figures and names
 * figures.c's, periodic snapshots schedule.c's.
 *
 * Policy stop (the Firecracker-style baseline): pause the vCPUs, write all of RAM,
 * resume. Policy cow: pause, capture vCPU and process state, write-protect all guest
 * RAM with userfaultfd, resume (the pause does not depend on RAM size), then a writer
 * thread saves every page in address order while a fault thread serves the guest's
 * writes: the first write to a page not yet saved copies its old contents into a
 * buffer from the page pool, lifts the protection and lets the guest go on; the writer
 * later saves the copy. A per-page atomic state (pagestate.h) decides who saves each
 * page, exactly once, so the image equals guest memory at the instant of the pause,
 * whatever the guest does afterwards. Pages not present at that instant are zero and
 * are saved as holes. Anything that would discard guest memory behind the guest's back
 * during a snapshot calls snap_before_discard() first.
 */
#include "engine.h"
#include "../vmm/base/role.h"
#include "track.h"
#include "cow.h"
#include "squeeze.h"
#include "pagestate.h"
#include "plan.h"
#include "../vmm/base/mono.h"
#include "../vmm/base/pages.h"
#include "../mmu/resident.h"
#include "../vmm/base/log.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>

/*
 * The per-page tables (copy, pre_hash, state, pre, faulted: 19 bytes per guest page)
 * in one mapping, backed by huge pages where the host allows and resident from the
 * start: the pause and the fault path write them, and a first touch there costs a page
 * fault each (more where the host backs memory lazily, as on our nested machines).
 */
#define SNAP_TABLE_BYTES_PER_PAGE (2 * sizeof(uint64_t) + 6)

static int snap_tables_alloc(struct snap_engine *e, uint64_t pages)
{
	size_t len = (pages * SNAP_TABLE_BYTES_PER_PAGE + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1);
	uint8_t *t = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (t == MAP_FAILED)
		return -ENOMEM;
	madvise(t, len, MADV_HUGEPAGE);
	for (size_t i = 0; i < len; i += PAGE_SIZE)
		((volatile uint8_t *)t)[i] = 0;
	e->tables = t;
	e->tables_len = len;
	e->copy = (void **)(void *)t;
	e->pre_hash = (uint64_t *)(void *)(t + pages * sizeof(uint64_t));
	e->state = t + pages * 2 * sizeof(uint64_t);
	e->pre = e->state + pages;
	e->faulted = e->pre + pages;
	e->dirty = e->faulted + pages;
	e->dirty_instant = e->dirty + pages;
	e->was_present = e->dirty_instant + pages;
	return 0;
}

/* A pool slot holds a region; a pool smaller than one region holds single pages. */
static size_t snap_slot_size(size_t pool_bytes, uint64_t region_size)
{
	size_t slot = PAGE_SIZE;

	if (pool_bytes >= region_size)
		return (size_t)region_size;
	while (slot * 2 <= pool_bytes)
		slot *= 2;
	return slot;
}

int snap_engine_init(struct snap_engine *e, const struct snap_target *t, size_t pool_bytes,
		     struct tracker *tracker, uint64_t region_size)
{
	uint64_t pages = t->mem->size / PAGE_SIZE, chunks = t->mem->size / IMG_CHUNK;
	int rc;

	memset(e, 0, sizeof(*e));
	e->t = *t;
	e->host = t->mem->host;
	e->size = t->mem->size;
	e->wp.fd = -1;
	e->tracker = tracker;
	e->region_size = region_size;
	e->n_regions = (e->size + region_size - 1) / region_size;
	e->def = (struct snap_request){ .policy = SNAP_CCOW, .threshold = SNAP_DEFAULT_THRESHOLD,
					.precopy = SNAP_DEFAULT_PRECOPY,
					.pause_budget_ms = SNAP_DEFAULT_PAUSE_BUDGET_MS,
					.codec = SNAP_DEFAULT_CODEC };
	pthread_mutex_init(&e->lock, NULL);
	e->split = calloc(chunks, 1);
	e->region_busy = calloc(e->n_regions, 1);
	e->tune = (struct snap_tuning){ .fault_threads = SNAP_DEFAULT_FAULT_THREADS,
					.fault_rt = SNAP_DEFAULT_FAULT_RT,
					.copier_nice = SNAP_DEFAULT_COPIER_NICE,
					.writer_nice = SNAP_DEFAULT_WRITER_NICE,
					.pool_keep_s = SNAP_DEFAULT_POOL_KEEP_S,
					.held_compress = SNAP_DEFAULT_HELD_COMPRESS };
	pthread_mutex_init(&e->copier_lock, NULL);
	pthread_cond_init(&e->copier_cv, NULL);
	e->chunk_saved_at = calloc(chunks, sizeof(uint64_t));
	e->obs = calloc(e->n_regions, sizeof(struct cov_obs));
	e->hot = calloc(e->n_regions, 1);
	e->eager = calloc(e->n_regions, 1);
	e->order = calloc(chunks, sizeof(uint64_t));
	if (wq_init(&e->wq) || snap_tables_alloc(e, pages) || !e->split || !e->region_busy ||
	    !e->hot || !e->eager || !e->order || !e->chunk_saved_at || !e->obs)
		return -ENOMEM;
	rc = pool_init(&e->pool, pool_bytes, snap_slot_size(pool_bytes, region_size));
	if (rc)
		log_err("cannot reserve the %zu MiB snapshot page pool: %s", pool_bytes >> 20,
			strerror(-rc));
	return rc ? rc : squeeze_init(e);
}

void snap_fail(struct snap_engine *e, int rc, const char *what)
{
	pthread_mutex_lock(&e->lock);
	if (!e->cur.error[0])
		snprintf(e->cur.error, sizeof(e->cur.error), "%s: %s", what, strerror(-rc));
	pthread_mutex_unlock(&e->lock);
}

int snap_save(struct snap_engine *e, uint64_t p, const uint8_t *data)
{
	if (!data || img_page_is_zero(data)) {
		__atomic_fetch_add(&e->cur.pages_zero, 1, __ATOMIC_RELAXED);
		return img_write_page(e->img, p, NULL);
	}
	return img_write_page(e->img, p, data);
}

/* Unprotecting single pages split the huge pages that back guest RAM; put them back
 * together once the snapshot is done, or the guest runs slower (TLB misses) and the
 * next snapshot's write protection takes ten times longer. */
static void snap_collapse_split(struct snap_engine *e)
{
	for (uint64_t c = 0; c < e->size / IMG_CHUNK; c++) {
		if (!e->split[c])
			continue;
		e->split[c] = 0;
		gmem_collapse(e->t.mem, c * IMG_CHUNK, IMG_CHUNK);
	}
}

void snap_before_discard(struct snap_engine *e, uint64_t gpa, uint64_t len)
{
	uint64_t first = gpa / PAGE_SIZE, end = (gpa + len) / PAGE_SIZE;

	if (end > e->size / PAGE_SIZE)
		end = e->size / PAGE_SIZE;
	if (first >= end)
		return;
	track_unprotected(e, first, end - first); /* rewritten without a fault */
	if (!__atomic_load_n(&e->threads_live, __ATOMIC_ACQUIRE))
		return;
	for (uint64_t p = first; p < end; p++)
		cow_page(e, p, false);
}

/* Sleep as needed to keep the writer at @rate bytes/s since it started. */
static void snap_throttle(struct snap_engine *e, uint64_t bytes)
{
	uint64_t due_ns, elapsed;

	if (!e->rate)
		return;
	due_ns = (uint64_t)((double)bytes / (double)e->rate * 1e9);
	elapsed = mono_ns() - e->t_start_ns;
	if (due_ns > elapsed) {
		struct timespec ts = { .tv_sec = (time_t)((due_ns - elapsed) / 1000000000ULL),
				       .tv_nsec = (long)((due_ns - elapsed) % 1000000000ULL) };

		nanosleep(&ts, NULL);
	}
}

/* The guest's progress count (mmu/tracker.h), which times what a snapshot sees. */
static uint64_t snap_progress(const struct snap_engine *e)
{
	return e->tracker ? tracker_progress_now(e->tracker) : 0;
}

/* After chunk staging: who saves page @p. The writer takes a page still protected
 * (its bytes, staged before, are the instant's), waits out a copy being published,
 * and leaves pages a fault thread saved itself. */
static enum img_page_what snap_take_staged(struct snap_engine *e, uint64_t p)
{
	uint8_t *st = &e->state[p];

	for (;;) {
		if (ps_take(st, PS_SAVED)) {
			e->cur.pages_saved_by_writer++;
			return IMG_PAGE_DATA;
		}
		switch (ps_get(st)) {
		case PS_COPYING: /* its copy[] is being set: a few instructions */
			sched_yield();
			continue;
		case PS_COPIED:
		case PS_PACKED:
			return IMG_PAGE_DATA;
		case PS_ZERO:
			return IMG_PAGE_HOLE;
		case PS_PARENT:
			return IMG_PAGE_PARENT;
		default:
			return IMG_PAGE_DONE;
		}
	}
}

/* Copies of chunk @c's pages into the staged chunk @stage; their buffers go back. */
static void snap_stage_copies(struct snap_engine *e, uint64_t c, uint8_t *stage)
{
	const uint64_t per = IMG_CHUNK / PAGE_SIZE;

	for (uint64_t i = 0, p = c * per; i < per; i++, p++) {
		if (ps_get(&e->state[p]) != PS_COPIED)
			continue;
		memcpy(stage + i * PAGE_SIZE, e->copy[p], PAGE_SIZE);
		if (e->pre[p])
			e->pre_hash[p] = XXH3_64bits(e->copy[p], PAGE_SIZE);
		pool_put(&e->pool, e->copy[p]);
		e->copy[p] = NULL;
		ps_set(&e->state[p], PS_SAVED);
	}
}

/*
 * Save chunk @c: stage, release, write. Its protected pages are copied to a staging
 * buffer without any lock (they cannot change while protected) and then taken; the
 * chunk is unprotected at once, so the guest never waits for the disk; copies made by
 * faults are added; the chunk is checksummed and queued for the I/O thread, which
 * writes its runs of data pages. Adds the bytes of data to *@written.
 */
static int snap_write_chunk(struct snap_engine *e, uint64_t c, uint64_t *written)
{
	const uint64_t per = IMG_CHUNK / PAGE_SIZE, first = c * per;
	struct wq_chunk *ch = wq_next(&e->wq);
	uint64_t zero = 0, data = 0;
	int rc;

	if (!ch)
		return wq_finish(&e->wq); /* a write failed */
	squeeze_claim(e, c);
	for (uint64_t i = 0; i < per; i++)
		if (ps_get(&e->state[first + i]) == PS_PROTECTED)
			memcpy(ch->buf + i * PAGE_SIZE, e->host + (first + i) * PAGE_SIZE, PAGE_SIZE);
	for (uint64_t i = 0; i < per; i++) {
		ch->what[i] = (uint8_t)snap_take_staged(e, first + i);
		data += ch->what[i] == IMG_PAGE_DATA;
		if (ch->what[i] == IMG_PAGE_HOLE) /* compressed, a hole reads as zero */
			memset(ch->buf + i * PAGE_SIZE, 0, PAGE_SIZE);
	}
	/* Tracked (now, or still if this snapshot fails): saved pages stay protected and
	 * a write marks them. */
	if (!e->track_next && !e->tracking)
		uffd_protect(&e->wp, c * IMG_CHUNK, IMG_CHUNK, false);
	e->chunk_saved_at[c] = snap_progress(e);
	snap_stage_copies(e, c, ch->buf);
	rc = squeeze_unpack(e, c, ch, &zero); /* 1: compressed already, while it was held */
	if (!rc)
		rc = img_chunk_prepare(e->img, c, ch->buf, ch->what, &zero);
	rc = rc == 1 ? 0 : rc;
	ch->c = c;
	ch->data = ch->buf;
	if (!rc)
		wq_push(&e->wq, ch);
	__atomic_fetch_add(&e->cur.pages_zero, zero, __ATOMIC_RELAXED);
	*written += data * PAGE_SIZE;
	return rc;
}

/* Save every page still owed to the image, chunk by chunk in the plan's order; then
 * wait until the copier, every fault being served and every write are done. */
static int snap_write_pages(struct snap_engine *e)
{
	uint64_t written = 0;
	int rc = wq_start(&e->wq, e->img, e->cur.threads, 0), wrc;

	for (uint64_t i = 0; i < e->size / IMG_CHUNK && !rc; i++) {
		__atomic_store_n(&e->write_at, i, __ATOMIC_RELEASE);
		rc = snap_write_chunk(e, e->order[i], &written);
		if (!rc && __atomic_load_n(&e->stopping, __ATOMIC_ACQUIRE))
			rc = -ECANCELED;
		snap_throttle(e, written);
	}
	wrc = wq_finish(&e->wq);
	rc = rc ? rc : wrc;
	cow_copy_end(e);
	if (rc)
		snap_fail(e, rc, rc == -ECANCELED ? "cancelled" : "writing the image");
	return rc;
}

/* Stop: chunk @c of paused memory to the I/O threads. A chunk whose pages are all
 * present is stored straight from guest memory; one with absent pages is staged, so
 * that compressing it does not fault them in. */
static int snap_queue_paused_chunk(struct snap_engine *e, uint64_t c)
{
	const uint64_t per = IMG_CHUNK / PAGE_SIZE, first = c * per;
	const uint8_t *mem = e->host + c * IMG_CHUNK;
	struct wq_chunk *ch = wq_next(&e->wq);
	uint64_t zero = 0, absent = 0;
	int rc;

	if (!ch)
		return wq_finish(&e->wq); /* a write failed */
	for (uint64_t i = 0; i < per; i++) {
		bool present = ps_get(&e->state[first + i]) == PS_PROTECTED;

		ch->what[i] = present ? IMG_PAGE_DATA : IMG_PAGE_HOLE;
		absent += !present;
		ps_set(&e->state[first + i], PS_SAVED);
	}
	ch->data = mem;
	if (absent) {
		for (uint64_t i = 0; i < per; i++)
			if (ch->what[i] == IMG_PAGE_DATA)
				memcpy(ch->buf + i * PAGE_SIZE, mem + i * PAGE_SIZE, PAGE_SIZE);
			else
				memset(ch->buf + i * PAGE_SIZE, 0, PAGE_SIZE);
		ch->data = ch->buf;
	}
	rc = img_chunk_prepare(e->img, c, ch->data, ch->what, &zero);
	ch->c = c;
	if (!rc)
		wq_push(&e->wq, ch);
	e->cur.pages_zero += zero;
	e->cur.pages_saved_by_writer += per - zero;
	return rc;
}

/* Policy stop: with the guest paused the memory is the writer's alone; the I/O
 * threads store it chunk by chunk (zero and absent pages stay holes), and no rate
 * limit applies: a limit would only lengthen the pause. */
static int snap_write_paused_pages(struct snap_engine *e)
{
	int rc = wq_start(&e->wq, e->img, e->cur.threads, 0), wrc;

	for (uint64_t c = 0; c < e->size / IMG_CHUNK && !rc; c++)
		rc = snap_queue_paused_chunk(e, c);
	wrc = wq_finish(&e->wq);
	rc = rc ? rc : wrc;
	if (!rc && __atomic_load_n(&e->stopping, __ATOMIC_ACQUIRE))
		rc = -ECANCELED;
	if (rc)
		snap_fail(e, rc, rc == -ECANCELED ? "cancelled" : "writing the image");
	return rc;
}

/*
 * What the snapshot saw the guest write, per region, for the coverage tracker: a page
 * copied with its region was watched until the end (written if its contents changed
 * meanwhile); any other present page until the writer saved its chunk (written if the
 * guest's write fault came first). Times are the guest's progress, not the clock.
 * Pages copied with their region but unchanged by the end are also the memory CCoW
 * spent for nothing (the paper's bloat).
 */
static void snap_observe(struct snap_engine *e, bool fold)
{
	uint64_t end = snap_progress(e), per_chunk = IMG_CHUNK / PAGE_SIZE;

	memset(e->obs, 0, e->n_regions * sizeof(e->obs[0]));
	for (uint64_t p = 0; p < e->size / PAGE_SIZE; p++) {
		struct cov_obs *o = &e->obs[p * PAGE_SIZE / e->region_size];
		uint64_t until;

		if (e->pre[p]) {
			bool same = XXH3_64bits(e->host + p * PAGE_SIZE, PAGE_SIZE) == e->pre_hash[p];

			e->cur.pages_precopied_unwritten += same;
			o->written += !same;
			until = end;
			e->pre[p] = 0;
		} else if (ps_get(&e->state[p]) == PS_ZERO) {
			continue;
		} else {
			o->written += e->faulted[p];
			until = e->chunk_saved_at[p / per_chunk];
		}
		o->pages++;
		o->exposure += until > e->progress_start ? (double)(until - e->progress_start) : 0;
	}
	if (fold && e->tracker)
		tracker_snapshot_observed(e->tracker, e->obs,
					end > e->progress_start ? end - e->progress_start : 0);
}

/* Fork: the child wrote the image, so its figures are read back from it. */
static void snap_stored_bytes(struct snap_engine *e)
{
	struct img_reader r;
	char err[IMG_ERR_LEN];

	if (img_open(e->cur.file, &r, err) == 0) {
		img_reader_bytes(&r, &e->cur.bytes_raw, &e->cur.bytes_stored);
		img_close(&r);
	}
}

/* Wrap up: sections, fsync, rename, figures; or remove the temporary file. */
static void snap_finish(struct snap_engine *e, int rc)
{
	if (!rc && e->policy == SNAP_FORK) {
		img_forget(e->img); /* the child finished it */
		snap_stored_bytes(e);
	} else if (!rc) {
		img_writer_bytes(e->img, &e->cur.bytes_raw, &e->cur.bytes_stored);
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
	e->cur.copy_bytes_peak = pool_take_peak(&e->pool);
	e->cur.held_stored_bytes = e->cur.copy_bytes_peak;
	e->cur.held_raw_bytes = pool_take_raw_peak(&e->pool);
	e->cur.pool_bytes = pool_ready_bytes(&e->pool);
	e->cur.pool_resident_bytes = pool_resident_bytes(&e->pool);
	e->cur.duration_ms = (mono_ns() - e->t_start_ns) / 1000000ULL;
	if (e->tracker) {
		e->cur.dirty_harvests = e->tracker->harvests;
		e->cur.harvest_ms = e->tracker->harvest_ns / 1000000ULL;
		if (!rc)
			tracker_snapshot_took(e->tracker, (double)e->cur.duration_ms / 1000.0);
	}
	e->cur.bytes = rc ? 0 : img_disk_bytes(e->cur.file);
	if (!rc)
		track_done(e, e->cur.file);
	else if (e->tracking || e->track_next)
		track_failed(e); /* whatever failed, the pages it took stay written */
	e->cur.ok = !rc;
	e->cur.done = true;
	e->busy = false;
	e->last_end_s = mono_s();
	pthread_mutex_unlock(&e->lock);
	if (rc)
		log_warn("snapshot %llu to %s failed: %s", (unsigned long long)e->cur.id,
			 e->cur.file, e->cur.error);
	if (e->on_done)
		e->on_done(e->on_done_ctx);
}

/* After a failed snapshot: copies that were never written go back to the pool, or
 * it would shrink with every failure. */
static void snap_reclaim_copies(struct snap_engine *e)
{
	for (uint64_t p = 0; p < e->size / PAGE_SIZE; p++)
		if (ps_get(&e->state[p]) == PS_COPIED && e->copy[p]) {
			pool_put(&e->pool, e->copy[p]);
			e->copy[p] = NULL;
			ps_set(&e->state[p], PS_SAVED);
		}
	squeeze_reclaim(e);
}

/* After a failure: the guest must not stay write-protected for this snapshot's sake,
 * and copies never written go back. With tracking, protection stays, but no page is
 * left to copy, and the pages this snapshot took as written stay marked. */
static void snap_unprotect_failed(struct snap_engine *e)
{
	if (e->tracking || e->track_next)
		track_failed(e);
	else
		uffd_protect(&e->wp, 0, e->size, false);
	snap_reclaim_copies(e);
}

static void *snap_writer_thread(void *arg)
{
	struct snap_engine *e = arg;
	int rc;

	role_enter(ROLE_SNAPSHOT);
	cow_nice(e->tune.writer_nice);
	rc = snap_write_pages(e);

	__atomic_store_n(&e->threads_live, false, __ATOMIC_RELEASE);
	snap_observe(e, !rc);
	if (rc)
		snap_unprotect_failed(e);
	snap_finish(e, rc);
	if (!__atomic_load_n(&e->stopping, __ATOMIC_ACQUIRE))
		snap_collapse_split(e);
	/* Only now may coverage be measured again: while huge pages are put back
	 * together the guest stalls, and a window would take that for running. */
	if (e->tracker)
		tracker_hold(e->tracker, false);
	return NULL;
}

static void snap_mark_run(void *ctx, uint64_t first, uint64_t n)
{
	memset(((struct snap_engine *)ctx)->state + first, PS_PROTECTED, n);
}

/* Pages present (or swapped out) at the pause must be saved; the others are zero and
 * never need protection (UFFDIO_WRITEPROTECT skips them anyway). */
static int snap_mark_pages(struct snap_engine *e)
{
	e->cur.pages_total = e->size / PAGE_SIZE;
	memset(e->faulted, 0, e->size / PAGE_SIZE);
	memset(e->state, PS_ZERO, e->size / PAGE_SIZE);
	return resident_scan(e->host, e->size, snap_mark_run, e);
}

/* Eager pre-copy of region @r during the pause: its protected pages go to a pool
 * slot, faulted in now if none is ready (this is what the pause budget is for).
 * False when the pool cannot take it (the region is then protected like any other). */
static bool snap_eager_region(struct snap_engine *e, uint64_t r)
{
	uint64_t first, end;

	if (!cow_copy_eager(e, r))
		return false;
	plan_region_pages(e, r, &first, &end);
	track_unprotected(e, first, end - first); /* never protected: untracked */
	e->eager[r] = 1;
	e->cur.regions_eager++;
	return true;
}

/* --precopy eager: while the vCPUs are paused, copy hot regions in the writer's order
 * (hot first) until the pause budget is spent; they are never write-protected, so
 * the guest takes no trap in them at all. */
static void snap_precopy_eager(struct snap_engine *e, const struct snap_request *req)
{
	uint64_t budget_ns = (uint64_t)(req->pause_budget_ms * 1e6);

	memset(e->eager, 0, e->n_regions);
	if (req->policy != SNAP_CCOW || req->precopy != SNAP_PRECOPY_EAGER)
		return;
	for (uint64_t i = 0; i < e->size / IMG_CHUNK; i++) {
		uint64_t r0, r1;

		plan_chunk_regions(e, e->order[i], &r0, &r1);
		for (uint64_t r = r0; r <= r1; r++) {
			if (!e->hot[r] || e->eager[r])
				continue;
			if (mono_ns() - e->t_start_ns >= budget_ns || !snap_eager_region(e, r))
				return;
		}
	}
}

/* Write-protect all guest RAM except the regions copied during the pause. */
static int snap_protect(struct snap_engine *e)
{
	uint64_t run = 0;
	int rc = 0;

	for (uint64_t r = 0; r <= e->n_regions && !rc; r++) {
		if (r < e->n_regions && !e->eager[r])
			continue;
		if (r > run) { /* regions [run, r) are protected in one call */
			uint64_t end = r * e->region_size;

			if (end > e->size)
				end = e->size;
			rc = uffd_protect(&e->wp, run * e->region_size, end - run * e->region_size, true);
		}
		run = r + 1;
	}
	return rc;
}

/* cow and ccow write-protect memory with userfaultfd; stop and fork do not. */
static bool snap_uses_wp(enum snap_policy p)
{
	return p == SNAP_COW || p == SNAP_CCOW;
}

/* Whether @dir may hold images: beneath one of the engine's image directories. */
static int snap_dir_allowed(const struct snap_engine *e, int dir, const char *file, char *err,
			    size_t errlen)
{
	int n;

	if (!e->n_image_dirs)
		return 0;
	for (int i = 0; i < e->n_image_dirs; i++)
		if (img_dir_beneath(dir, e->image_dirs[i].dev, e->image_dirs[i].ino))
			return 0;
	n = snprintf(err, errlen, "%s is outside the image directories (", file);
	for (int i = 0; i < e->n_image_dirs && n > 0 && (size_t)n < errlen; i++)
		n += snprintf(err + n, errlen - (size_t)n, "%s%s", i ? ", " : "", e->image_dirs[i].name);
	if (n > 0 && (size_t)n < errlen)
		snprintf(err + n, errlen - (size_t)n, "); start ccvm with --image-dir DIR to allow "
			 "another");
	return -EACCES;
}

/* Open the directory of the image to write, once, and check it may hold images. */
static int snap_image_dir(const struct snap_engine *e, const char *file, char *err,
			  size_t errlen)
{
	const char *base;
	int dir = img_dir_open(file, &base), rc;

	if (dir < 0) {
		snprintf(err, errlen, "cannot create the image %s: %s", file,
			 dir == -EISDIR ? "that names a directory, not a file" : strerror(-dir));
		return dir;
	}
	rc = snap_dir_allowed(e, dir, file, err, errlen);
	if (rc) {
		close(dir);
		return rc;
	}
	return dir;
}

/* Before the pause (none of it needs the guest still): create the image file and,
 * for the first cow or ccow snapshot, the write protection and its threads. */
static int snap_prepare(struct snap_engine *e, const struct snap_request *req, char *err,
			size_t errlen)
{
	struct img_header_info info = { .ram_size = e->size, .policy = req->policy,
					.codec = req->codec, .level = req->level,
					.flags = req->parent ? IMG_FLAG_CHILD : 0 };
	char recorded[IMG_PATH_MAX];
	struct timespec rt;
	int dir, rc;

	clock_gettime(CLOCK_REALTIME, &rt);
	info.created_ns = (uint64_t)rt.tv_sec * 1000000000ULL + (uint64_t)rt.tv_nsec;
	dir = snap_image_dir(e, req->file, err, errlen);
	if (dir < 0)
		return dir;
	rc = img_create_at(dir, req->file, &info, &e->img);
	close(dir);
	if (!rc && req->parent) {
		rc = track_parent_path(e, req->file, recorded, sizeof(recorded));
		if (!rc)
			rc = img_set_parent(e->img, recorded, e->track_identity);
		if (rc) {
			img_abort(e->img);
			e->img = NULL;
		}
	}
	if (rc) {
		snprintf(err, errlen, "cannot create the image %s: %s", req->file, strerror(-rc));
		return rc;
	}
	rc = snap_uses_wp(req->policy) ? cow_threads_start(e) : 0;
	if (!rc && snap_uses_wp(req->policy))
		cow_pool_prepare(e, req);
	if (rc) {
		snprintf(err, errlen, "cannot start the snapshot: %s", strerror(-rc));
		img_abort(e->img);
		e->img = NULL;
	}
	return rc;
}

/* The pause: state, which pages the instant holds, the plan, write protection. */
static int snap_begin(struct snap_engine *e, const struct snap_request *req, char *err,
		      size_t errlen)
{
	uint64_t t0 = mono_ns(), t1, t2;
	int rc;

	e->progress_start = snap_progress(e); /* the vCPUs are paused: it holds still */
	rc = e->t.ops->capture(e->t.ctx, e->img);
	t1 = mono_ns();
	if (!rc)
		rc = snap_mark_pages(e);
	/* In the pause, a pass over every page: only when this snapshot starts or continues
	 * tracking (a snapshot that does neither ends tracking, or fails and leaves the
	 * marks as they are, which only ever adds pages to the next incremental one). */
	e->cur.pages_held = e->cur.pages_total;
	if (!rc && e->track_next)
		track_instant(e, req->parent != NULL);
	if (!rc)
		plan_snapshot(e, req);
	t2 = mono_ns();
	if (!rc && snap_uses_wp(req->policy)) {
		cow_pool_plan(e);
		snap_precopy_eager(e, req);
		rc = snap_protect(e);
	}
	log_debug("pause parts: pausing %llu us, capture %llu us, mark %llu us, protect %llu us",
		 (unsigned long long)(t0 - e->t_start_ns) / 1000, (unsigned long long)(t1 - t0) / 1000,
		 (unsigned long long)(t2 - t1) / 1000, (unsigned long long)(mono_ns() - t2) / 1000);
	if (rc) {
		snprintf(err, errlen, "cannot start the snapshot: %s", strerror(-rc));
		img_abort(e->img);
		e->img = NULL;
	}
	return rc;
}

/*
 * Policy fork: the kernel's copy-on-write. While paused, the monitor forks; the child
 * sees memory as it was at the fork, writes it into the image and exits, while the
 * parent resumes at once and pays a kernel copy-on-write fault for each first write
 * to a page it still shares with the child. A waiter thread reaps the child and takes
 * the figures: the parent's minor faults during the snapshot, and the extra memory
 * (PSS of both, so that shared pages count once, less the parent's before).
 */
#define FORK_POLL_MS 20

/* Proportional set size of process @pid in bytes, 0 if unknown. */
static uint64_t snap_pss(pid_t pid)
{
	char path[64], line[256];
	unsigned long long kb = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Pss: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

static long snap_minflt(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : 0;
}

/* In the child: only the forking thread lives here. Save every page as the fork left
 * it (holes where nothing was resident), finish the image, exit 0 or with the error
 * number. It dies with the monitor, so a killed monitor leaves no child to rename an
 * image later. */
static void snap_fork_child(struct snap_engine *e)
{
	const uint64_t per = IMG_CHUNK / PAGE_SIZE;
	struct wq_chunk *ch = &e->wq.slot[0]; /* the queue is idle: its buffers are free */
	int rc = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != e->parent)
		_exit(ESRCH); /* the monitor died before the line above */
	for (uint64_t c = 0; c < e->size / IMG_CHUNK && !rc; c++) {
		uint64_t zero;

		for (uint64_t i = 0; i < per; i++) {
			bool present = ps_get(&e->state[c * per + i]) != PS_ZERO;

			ch->what[i] = present ? IMG_PAGE_DATA : IMG_PAGE_HOLE;
			if (present)
				memcpy(ch->buf + i * PAGE_SIZE, e->host + (c * per + i) * PAGE_SIZE, PAGE_SIZE);
			else
				memset(ch->buf + i * PAGE_SIZE, 0, PAGE_SIZE);
		}
		rc = img_chunk_prepare(e->img, c, ch->buf, ch->what, &zero);
		if (!rc)
			rc = img_chunk_write(e->img, c, ch->buf, ch->what, e->wq.scratch[0]);
		snap_throttle(e, (c + 1) * IMG_CHUNK);
	}
	if (!rc)
		rc = img_finish(e->img);
	_exit(rc ? ((-rc & 0xff) ? (-rc & 0xff) : EIO) : 0);
}

/* While paused: fork the writer. Guest RAM is MADV_DONTFORK (nothing the monitor
 * starts may share it), so it is made forkable for this one fork only. */
static int snap_fork(struct snap_engine *e)
{
	pid_t pid;
	int rc;

	e->parent = (int)getpid();
	e->minflt0 = snap_minflt();
	if (madvise(e->host, e->size, MADV_DOFORK) < 0)
		return -errno;
	pid = fork();
	if (pid == 0)
		snap_fork_child(e);
	rc = pid < 0 ? -errno : 0;
	madvise(e->host, e->size, MADV_DONTFORK);
	e->child = pid > 0 ? pid : 0;
	return rc;
}

/* The child's end as a result: 0, or -errno with the error set. */
static int snap_fork_status(struct snap_engine *e, int status)
{
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status)) {
		snap_fail(e, -WEXITSTATUS(status), "writing the image (child)");
		return -WEXITSTATUS(status);
	}
	snap_fail(e, -ECHILD, "the writing child was killed");
	return -ECHILD;
}

static void *snap_fork_waiter(void *arg)
{
	struct snap_engine *e = arg;
	struct timespec nap = { .tv_nsec = FORK_POLL_MS * 1000000L };
	uint64_t peak = 0, zero = 0;
	int status = 0;

	role_enter(ROLE_SNAPSHOT);
	for (;;) {
		pid_t w = waitpid(e->child, &status, WNOHANG);
		uint64_t pss;

		if (w == e->child || (w < 0 && errno != EINTR))
			break;
		if (__atomic_load_n(&e->stopping, __ATOMIC_ACQUIRE))
			kill(e->child, SIGKILL);
		pss = snap_pss(getpid()) + snap_pss(e->child);
		peak = pss > peak ? pss : peak;
		nanosleep(&nap, NULL);
	}
	for (uint64_t p = 0; p < e->size / PAGE_SIZE; p++)
		zero += ps_get(&e->state[p]) == PS_ZERO;
	e->child = 0;
	e->cur.cow_faults = (uint64_t)(snap_minflt() - e->minflt0);
	e->cur.extra_bytes = peak > e->child_pss0 ? peak - e->child_pss0 : 0;
	e->cur.pages_zero = zero;
	e->cur.pages_saved_by_writer = e->cur.pages_total - zero;
	snap_finish(e, snap_fork_status(e, status));
	if (e->tracker)
		tracker_hold(e->tracker, false);
	return NULL;
}

/* fork: the child writes; resume at once; a thread waits for the child. */
static void snap_write_forked(struct snap_engine *e)
{
	int rc;

	if (e->writer_joinable) /* the previous snapshot's writer has finished */
		pthread_join(e->writer, NULL);
	e->writer_joinable = false;
	rc = snap_fork(e);
	e->cur.pause_us = (mono_ns() - e->t_start_ns) / 1000;
	e->t.ops->resume(e->t.ctx);
	if (!rc && pthread_create(&e->writer, NULL, snap_fork_waiter, e)) {
		kill(e->child, SIGKILL);
		waitpid(e->child, NULL, 0);
		e->child = 0;
		rc = -EAGAIN;
	}
	if (!rc) {
		e->writer_joinable = true;
		return;
	}
	snap_fail(e, rc, "forking the writer");
	snap_finish(e, rc);
	if (e->tracker)
		tracker_hold(e->tracker, false);
}

/* Claim the engine for a new snapshot: -EBUSY with a message when one runs, the VM
 * is stopping, or the target refuses. */
static int snap_reserve(struct snap_engine *e, const struct snap_request *req, char *err,
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
	e->cur.id = ++e->next_id;
	e->cur.policy = req->policy;
	e->cur.threshold = req->threshold;
	e->cur.precopy = req->precopy;
	e->cur.region_size = e->region_size;
	e->cur.codec = req->codec;
	e->cur.level = req->level;
	e->cur.threads = req->threads;
	e->policy = req->policy;
	snprintf(e->cur.file, sizeof(e->cur.file), "%s", req->file);
	pthread_mutex_unlock(&e->lock);
	return 0;
}

/* stop: all of memory written while paused, then resume. */
static void snap_write_paused(struct snap_engine *e)
{
	int rc = snap_write_paused_pages(e);

	e->cur.pause_us = (mono_ns() - e->t_start_ns) / 1000;
	e->t.ops->resume(e->t.ctx);
	snap_finish(e, rc);
	if (e->tracker)
		tracker_hold(e->tracker, false);
}

/* cow, ccow: resume at once; the writer thread saves memory in the background. */
static void snap_write_background(struct snap_engine *e)
{
	if (e->writer_joinable) /* the previous snapshot's writer has finished */
		pthread_join(e->writer, NULL);
	e->writer_joinable = false;
	__atomic_store_n(&e->threads_live, true, __ATOMIC_RELEASE);
	e->cur.pause_us = (mono_ns() - e->t_start_ns) / 1000;
	e->t.ops->resume(e->t.ctx);
	cow_copy_begin(e);
	e->writer_joinable = true;
	if (pthread_create(&e->writer, NULL, snap_writer_thread, e)) {
		e->writer_joinable = false;
		cow_copy_end(e);
		__atomic_store_n(&e->threads_live, false, __ATOMIC_RELEASE);
		snap_unprotect_failed(e);
		snap_fail(e, -EAGAIN, "starting the writer");
		snap_finish(e, -EAGAIN);
		if (e->tracker)
			tracker_hold(e->tracker, false);
	}
}

int snap_storage_check(struct snap_request *req, char *err, size_t errlen)
{
	if ((unsigned)req->codec >= IMG_CODEC_NR) {
		snprintf(err, errlen, "unknown compression (known: zstd, lz4, none)");
		return -EINVAL;
	}
	if (!req->level)
		req->level = codec_default_level(req->codec);
	if (codec_level_check(req->codec, req->level)) {
		snprintf(err, errlen, req->codec == IMG_CODEC_NONE ?
			 "--compress-level needs a codec (--compress zstd or lz4)" :
			 req->codec == IMG_CODEC_ZSTD ?
			 "--compress-level for zstd must be from -7 to 19, not 0" :
			 "--compress-level for lz4 must be from 1 (fast) to 12 (high compression)");
		return -EINVAL;
	}
	if (!req->threads)
		req->threads = SNAP_DEFAULT_THREADS;
	if (req->threads < 1 || req->threads > WQ_THREADS_MAX) {
		snprintf(err, errlen, "--snapshot-threads must be from 1 to %d", WQ_THREADS_MAX);
		return -EINVAL;
	}
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
	rc = track_check(e, req, err, errlen);
	if (rc)
		goto err_unbusy;
	e->rate = req->rate;
	if (req->policy == SNAP_FORK) /* before the pause: reading it walks every mapping */
		e->child_pss0 = snap_pss(getpid());
	rc = snap_prepare(e, req, err, errlen);
	if (rc)
		goto err_unbusy;
	e->t_start_ns = mono_ns();
	if (e->tracker)
		tracker_hold(e->tracker, true);
	rc = e->t.ops->pause(e->t.ctx);
	if (rc) {
		snprintf(err, errlen, "the VM has stopped");
		img_abort(e->img);
		e->img = NULL;
		goto err_unhold;
	}
	rc = snap_begin(e, req, err, errlen);
	if (rc)
		goto err_resume;
	if (e->t.ops->at_instant)
		e->t.ops->at_instant(e->t.ctx, req->file);
	if (req->policy == SNAP_STOP)
		snap_write_paused(e);
	else if (req->policy == SNAP_FORK)
		snap_write_forked(e);
	else
		snap_write_background(e);
	snap_figures_of(e, e->cur.id, now);
	return 0;

err_resume:
	e->t.ops->resume(e->t.ctx);
err_unhold:
	if (e->tracker)
		tracker_hold(e->tracker, false);
err_unbusy:
	pthread_mutex_lock(&e->lock);
	e->busy = false;
	pthread_mutex_unlock(&e->lock);
	return rc;
}

bool snap_figures_of(struct snap_engine *e, uint64_t id, struct snap_figures *out)
{
	bool found;

	pthread_mutex_lock(&e->lock);
	found = id && id == e->cur.id;
	if (found) {
		*out = e->cur;
		if (!out->done)
			out->duration_ms = (mono_ns() - e->t_start_ns) / 1000000ULL;
	}
	pthread_mutex_unlock(&e->lock);
	return found;
}

void snap_engine_fini(struct snap_engine *e)
{
	pthread_mutex_lock(&e->lock);
	e->stopping = true;
	pthread_mutex_unlock(&e->lock);
	if (e->writer_joinable)
		pthread_join(e->writer, NULL);
	e->writer_joinable = false;
	cow_threads_stop(e);
	pool_fini(&e->pool);
	squeeze_fini(e);
	pthread_mutex_destroy(&e->copier_lock);
	pthread_cond_destroy(&e->copier_cv);
	wq_fini(&e->wq);
	if (e->tables)
		munmap(e->tables, e->tables_len);
	e->tables = NULL;
	free(e->split);
	free(e->region_busy);
	free(e->chunk_saved_at);
	free(e->obs);
	free(e->hot);
	free(e->eager);
	free(e->order);
	e->state = NULL;
	e->copy = NULL;
	e->split = NULL;
	e->region_busy = e->pre = e->hot = e->eager = e->faulted = NULL;
	e->pre_hash = e->chunk_saved_at = NULL;
	e->obs = NULL;
	e->order = NULL;
}
