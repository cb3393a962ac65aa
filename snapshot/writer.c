/*
 * writer.c - the stage that saves memory into the image, chunk by chunk.
 *
 * cow and ccow: in the plan's order, while the guest runs. Each chunk is staged: its
 * pages still protected are copied to a staging buffer without any lock (they cannot
 * change while protected) and then taken, so the chunk can be unprotected at once and
 * the guest never waits for the disk; copies made by faults (and packs the squeezer
 * made of them) are added; the chunk is checksummed and queued for the I/O threads.
 * stop: all of memory while paused, straight from guest memory where every page is
 * present. A rate limit applies to the background writer only (a limit would only
 * lengthen a pause).
 */
#include "writer.h"
#include "../base/mono.h"
#include "../base/pages.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

_Static_assert(IMG_CHUNK == HUGE_SIZE, "the tables' chunks are the image's");
_Static_assert(SNAP_THREADS_MAX == WQ_THREADS_MAX, "a request's threads fit the queue");

int writer_init(struct snap_writer *w, uint8_t *host, uint64_t size, struct snap_ptab *pt,
		const struct snap_plan *pl, struct snap_squeeze *sq, struct uffd *wp,
		struct tracker *tracker, const bool *stopping)
{
	memset(w, 0, sizeof(*w));
	*w = (struct snap_writer){ .host = host, .size = size, .pt = pt, .pl = pl, .sq = sq,
				   .wp = wp, .tracker = tracker, .stopping = stopping };
	return wq_init(&w->wq);
}

void writer_fini(struct snap_writer *w)
{
	wq_fini(&w->wq);
}

void writer_plan(struct snap_writer *w, const struct writer_job *job)
{
	w->job = *job;
	w->pages_saved = w->pages_zero = 0;
	__atomic_store_n(&w->write_at, 0, __ATOMIC_RELEASE);
}

int writer_save_page(struct snap_writer *w, uint64_t p, const uint8_t *data)
{
	if (!data || img_page_is_zero(data)) {
		__atomic_fetch_add(&w->pages_zero, 1, __ATOMIC_RELAXED);
		return img_write_page(w->job.img, p, NULL);
	}
	return img_write_page(w->job.img, p, data);
}

uint64_t writer_progress(const struct snap_writer *w)
{
	return w->tracker ? tracker_progress_now(w->tracker) : 0;
}

void writer_throttle(const struct snap_writer *w, uint64_t bytes)
{
	uint64_t due_ns, elapsed;

	if (!w->job.rate)
		return;
	due_ns = (uint64_t)((double)bytes / (double)w->job.rate * 1e9);
	elapsed = mono_ns() - w->job.t_start_ns;
	if (due_ns > elapsed) {
		struct timespec ts = { .tv_sec = (time_t)((due_ns - elapsed) / 1000000000ULL),
				       .tv_nsec = (long)((due_ns - elapsed) % 1000000000ULL) };

		nanosleep(&ts, NULL);
	}
}

/* After chunk staging: who saves page @p. The writer takes a page still protected
 * (its bytes, staged before, are the instant's), waits out a copy being published,
 * and leaves pages a fault thread saved itself. */
static enum img_page_what writer_take_staged(struct snap_writer *w, uint64_t p)
{
	uint8_t *st = &w->pt->state[p];

	for (;;) {
		if (ps_take(st, PS_SAVED)) {
			__atomic_fetch_add(&w->pages_saved, 1, __ATOMIC_RELAXED);
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
static void writer_stage_copies(struct snap_writer *w, uint64_t c, uint8_t *stage)
{
	const uint64_t per = IMG_CHUNK / PAGE_SIZE;

	for (uint64_t i = 0, p = c * per; i < per; i++, p++) {
		if (ps_get(&w->pt->state[p]) != PS_COPIED)
			continue;
		memcpy(stage + i * PAGE_SIZE, w->pt->copy[p], PAGE_SIZE);
		if (w->pt->pre[p])
			w->pt->pre_hash[p] = XXH3_64bits(w->pt->copy[p], PAGE_SIZE);
		pool_put(w->sq->pool, w->pt->copy[p]);
		w->pt->copy[p] = NULL;
		ps_set(&w->pt->state[p], PS_SAVED);
	}
}

/*
 * Save chunk @c: stage, release, write. Its protected pages are copied to a staging
 * buffer without any lock (they cannot change while protected) and then taken; the
 * chunk is unprotected at once, so the guest never waits for the disk; copies made by
 * faults are added; the chunk is checksummed and queued for the I/O thread, which
 * writes its runs of data pages. Adds the bytes of data to *@written.
 */
static int writer_chunk(struct snap_writer *w, uint64_t c, uint64_t *written)
{
	const uint64_t per = IMG_CHUNK / PAGE_SIZE, first = c * per;
	struct wq_chunk *ch = wq_next(&w->wq);
	uint64_t zero = 0, data = 0;
	int rc;

	if (!ch)
		return wq_finish(&w->wq); /* a write failed */
	squeeze_claim(w->sq, c);
	for (uint64_t i = 0; i < per; i++)
		if (ps_get(&w->pt->state[first + i]) == PS_PROTECTED)
			memcpy(ch->buf + i * PAGE_SIZE, w->host + (first + i) * PAGE_SIZE, PAGE_SIZE);
	for (uint64_t i = 0; i < per; i++) {
		ch->what[i] = (uint8_t)writer_take_staged(w, first + i);
		data += ch->what[i] == IMG_PAGE_DATA;
		if (ch->what[i] == IMG_PAGE_HOLE) /* compressed, a hole reads as zero */
			memset(ch->buf + i * PAGE_SIZE, 0, PAGE_SIZE);
	}
	/* Tracked (now, or still if this snapshot fails): saved pages stay protected and
	 * a write marks them. */
	if (!w->job.keep_protected)
		uffd_protect(w->wp, c * IMG_CHUNK, IMG_CHUNK, false);
	w->pt->chunk_saved_at[c] = writer_progress(w);
	writer_stage_copies(w, c, ch->buf);
	rc = squeeze_unpack(w->sq, c, ch, &zero); /* 1: compressed already, while it was held */
	if (!rc)
		rc = img_chunk_prepare(w->job.img, c, ch->buf, ch->what, &zero);
	rc = rc == 1 ? 0 : rc;
	ch->c = c;
	ch->data = ch->buf;
	if (!rc)
		wq_push(&w->wq, ch);
	__atomic_fetch_add(&w->pages_zero, zero, __ATOMIC_RELAXED);
	*written += data * PAGE_SIZE;
	return rc;
}

/* Save every page still owed to the image, chunk by chunk in the plan's order; then
 * wait until the copier, every fault being served and every write are done. */
int writer_run(struct snap_writer *w)
{
	uint64_t written = 0;
	int rc = wq_start(&w->wq, w->job.img, w->job.threads, 0), wrc;

	for (uint64_t i = 0; i < w->size / IMG_CHUNK && !rc; i++) {
		__atomic_store_n(&w->write_at, i, __ATOMIC_RELEASE);
		rc = writer_chunk(w, w->pl->order[i], &written);
		if (!rc && __atomic_load_n(w->stopping, __ATOMIC_ACQUIRE))
			rc = -ECANCELED;
		writer_throttle(w, written);
	}
	wrc = wq_finish(&w->wq);
	rc = rc ? rc : wrc;
	return rc;
}

/* Stop: chunk @c of paused memory to the I/O threads. A chunk whose pages are all
 * present is stored straight from guest memory; one with absent pages is staged, so
 * that compressing it does not fault them in. */
static int writer_paused_chunk(struct snap_writer *w, uint64_t c)
{
	const uint64_t per = IMG_CHUNK / PAGE_SIZE, first = c * per;
	const uint8_t *mem = w->host + c * IMG_CHUNK;
	struct wq_chunk *ch = wq_next(&w->wq);
	uint64_t zero = 0, absent = 0;
	int rc;

	if (!ch)
		return wq_finish(&w->wq); /* a write failed */
	for (uint64_t i = 0; i < per; i++) {
		bool present = ps_get(&w->pt->state[first + i]) == PS_PROTECTED;

		ch->what[i] = present ? IMG_PAGE_DATA : IMG_PAGE_HOLE;
		absent += !present;
		ps_set(&w->pt->state[first + i], PS_SAVED);
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
	rc = img_chunk_prepare(w->job.img, c, ch->data, ch->what, &zero);
	ch->c = c;
	if (!rc)
		wq_push(&w->wq, ch);
	__atomic_fetch_add(&w->pages_zero, zero, __ATOMIC_RELAXED);
	__atomic_fetch_add(&w->pages_saved, per - zero, __ATOMIC_RELAXED);
	return rc;
}

/* Policy stop: with the guest paused the memory is the writer's alone; the I/O
 * threads store it chunk by chunk (zero and absent pages stay holes), and no rate
 * limit applies: a limit would only lengthen the pause. */
int writer_run_paused(struct snap_writer *w)
{
	int rc = wq_start(&w->wq, w->job.img, w->job.threads, 0), wrc;

	for (uint64_t c = 0; c < w->size / IMG_CHUNK && !rc; c++)
		rc = writer_paused_chunk(w, c);
	wrc = wq_finish(&w->wq);
	rc = rc ? rc : wrc;
	if (!rc && __atomic_load_n(w->stopping, __ATOMIC_ACQUIRE))
		rc = -ECANCELED;
	return rc;
}

