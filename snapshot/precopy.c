/*
 * precopy.c - --precopy rounds: a snapshot that takes no fault. Before the instant,
 * while the guest runs, every page that holds data is written into the image; then,
 * round after round, the pages the dirty log says were written since; when what is left
 * would copy in under a quarter of the pause budget, the snapshot pauses. There, the pages
 * written since their last round are copied into the pool (and saved by the writer
 * afterwards), and every other page already stands in the file: nothing is
 * write-protected, so the guest never traps for this snapshot. It is live migration's
 * pre-copy (QEMU's, Firecracker users' own), aimed at the image file: the instant is
 * when the rounds converge, not when the snapshot was asked for. A live migration's
 * rounds are these too, aimed at its stream (migsend.c), with hot pages deferred to
 * the pause (defer_hot) and a round 0 in coverage order.
 *
 * A watched page costs the guest a fault at its next write (KVM write-protects it
 * again: ~30 us in our VMs, against ~100 us for a copy-on-write trap), so a page is
 * watched only just before its piece of round 0 is copied, and the hottest pages by
 * the tracker's page heat, as many as a quarter of the pause budget copies, are never
 * watched: the pause copies them anyway. The rounds' own view of what was written
 * goes back into the heat (observe.c).
 *
 * KVM's dirty log sees only the guest's writes. The monitor's own (system-call results
 * written in place, the vDSO clock page, the fastio ring, discarded pages) are marked
 * through guest memory's one translation (mmu/gmem.h) from the start of the pre-copy
 * and are copied in the pause whatever the rounds did. A pointer handed out before the
 * marks started is waited out by one short pause of the writers, or, for a call
 * blocked in a host call, marked from its recorded ranges.
 */
#include "precopy.h"
#include "image.h"
#include "../mmu/resident.h"
#include "../base/bits.h"
#include "../base/mono.h"
#include "../base/pages.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS_MAX 8           /* then the pause copies what is left, within its budget */
#define ROUNDS_BUF (2ULL << 20) /* a run is copied in pieces of this, then written */
/* A page copied in the pause before any was measured: memcpy and the pool's
 * bookkeeping, with room (VMs here copied ~1 us a page). */
#define ROUNDS_PAGE_NS_GUESS 2000
/* A round that leaves more than this share of the last one's pages has stopped
 * converging (the guest writes them as fast as they are written out). */
#define ROUNDS_CONVERGING 0.9
/* With hot pages deferred, a round is worth its bytes only while it takes off what the
 * pause must send at least this share of the pages it sent: past that, the pages it
 * sends are written again before the pause as often as not, and each goes twice. */
#define ROUNDS_WORTH 0.5
/* Rounds stop once what is left copies in this share of the pause budget; as many of the
 * hottest pages are held back for the pause. */
#define ROUNDS_LEFT_SHARE 4
#define ROUNDS_PACE_STEP_NS 50000000ULL /* a paced copy looks at the stop flag this often */
/* may_give_up: round 0 looks at the log once it has sent this many pages (32 MiB), or
 * an eighth of a smaller memory ... (A count, not a time, so what the look sees
 * depends on how long round 0 took to get there: at 16 MiB the zipf writer below had
 * rewritten under a quarter of it on a 200 MB/s disk, the rounds ran whole and the
 * image was 1.13x none's; at 32 MiB it gave up, 0.60x.) */
#define ROUNDS_PEEK_PAGES 8192
#define ROUNDS_PEEK_DEN 8
/* ... and stops when the writer has written again more than this share of the pages
 * it watched. Such a writer rewrites memory about as fast as a round writes it out:
 * every later round sends most of memory again and the rounds cannot converge (a
 * 3.8 M updates/s zipf writer rewrote 96% of 512 MiB within a snapshot, each page
 * 12 ms after its watch on average), and with a codec every page written again after
 * round 0 framed its chunk costs a raw slot besides its share of the frame: an
 * image of 1.56x `none`'s on a 200 MB/s disk, where the same snapshot without rounds
 * compresses to 0.58x. Redis in a VM stays under it: none of its 89 snapshots in
 * bench/peers/redis.py's ycsb-a run gave up. */
#define ROUNDS_GIVE_UP 0.25

int rounds_init(struct snap_rounds *r, struct gmem *mem, struct tracker *tracker)
{
	memset(r, 0, sizeof(*r));
	r->mem = mem;
	r->tracker = tracker;
	if (tracker)
		r->log = tracker->log;
	r->pages = mem->size / PAGE_SIZE;
	r->words = (r->pages + 63) / 64;
	return 0;
}

void rounds_fini(struct snap_rounds *r)
{
	rounds_end(r);
	free(r->dirty);
	free(r->marks);
	free(r->watched);
	free(r->held);
	free(r->seen);
	free(r->prev);
	free(r->deferred);
	free(r->pending);
	free(r->hot);
	free(r->buf);
	r->dirty = r->marks = r->watched = r->held = r->seen = NULL;
	r->prev = r->deferred = r->pending = NULL;
	r->hot = NULL;
	r->buf = NULL;
}

const char *rounds_refusal(const struct snap_rounds *r)
{
	return r->log.ops ? NULL : "no dirty log of the memory";
}

/* A bitmap of every page, the first time. */
static bool rounds_bitmap(struct snap_rounds *r, uint64_t **b)
{
	if (!*b)
		*b = calloc(r->words, sizeof(uint64_t));
	return *b != NULL;
}

/* The bitmaps and the buffer, the first time. */
static int rounds_alloc(struct snap_rounds *r)
{
	bool ok = rounds_bitmap(r, &r->dirty) && rounds_bitmap(r, &r->marks) &&
		  rounds_bitmap(r, &r->watched) && rounds_bitmap(r, &r->held) &&
		  rounds_bitmap(r, &r->seen) && rounds_bitmap(r, &r->prev) &&
		  rounds_bitmap(r, &r->deferred) && rounds_bitmap(r, &r->pending);

	if (ok && !r->hot)
		r->hot = calloc(r->pages, sizeof(uint32_t));
	if (ok && r->hot && !r->buf && posix_memalign((void **)&r->buf, PAGE_SIZE, ROUNDS_BUF))
		r->buf = NULL;
	return ok && r->hot && r->buf ? 0 : -ENOMEM;
}

struct rounds_copy {
	struct snap_rounds *r;
	const struct rounds_sink *sink;
	const bool *stop;
	uint64_t base;           /* the first page of the range being scanned */
	bool watch;              /* round 0: each piece watched just before its copy */
	bool done;               /* round 0 gave up: the rest of the scan is skipped */
	int rc;
};

/* Round 0: pages [first, first + n) but the held ones watched from now on (the log's
 * call takes a bitmap of all pages: the piece's bits are set for it, then cleared). */
static int rounds_watch_piece(struct snap_rounds *r, uint64_t first, uint64_t n)
{
	int rc;

	for (uint64_t p = first; p < first + n; p++)
		if (!bits_test(r->held, p))
			r->dirty[p / 64] |= 1ULL << (p % 64);
	rc = r->log.ops->watch(r->log.ctx, r->dirty);
	for (uint64_t p = first; p < first + n; p++) {
		r->watched[p / 64] |= r->dirty[p / 64] & (1ULL << (p % 64));
		r->dirty[p / 64] &= ~(1ULL << (p % 64));
	}
	return rc;
}

/* Under a rate (--rate), wait until the pages sent so far are due: the rounds' bytes go
 * to the same disk the writer is kept from flooding. Stops waiting when *stop turns. */
static void rounds_pace(const struct snap_rounds *r, const bool *stop)
{
	uint64_t due, now;

	if (!r->rate)
		return;
	due = r->t_start_ns + (uint64_t)((double)(r->pages_sent * PAGE_SIZE) /
					 (double)r->rate * 1e9);
	while ((now = mono_ns()) < due && !__atomic_load_n(stop, __ATOMIC_ACQUIRE)) {
		uint64_t ns = due - now < ROUNDS_PACE_STEP_NS ? due - now : ROUNDS_PACE_STEP_NS;
		struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ULL),
				       .tv_nsec = (long)(ns % 1000000000ULL) };

		nanosleep(&ts, NULL);
	}
}

static uint64_t rounds_peek_pages(const struct snap_rounds *r)
{
	uint64_t n = r->pages / ROUNDS_PEEK_DEN;

	return n < ROUNDS_PEEK_PAGES ? n : ROUNDS_PEEK_PAGES;
}

/* may_give_up, once round 0 has sent rounds_peek_pages: whether the writer has
 * written again more than ROUNDS_GIVE_UP of the pages watched so far. The log's pages
 * are kept in pending (the log forgets what it reports: the next harvest, or the
 * instant, takes them from there). */
static bool rounds_hopeless(struct snap_rounds *r, int *rc)
{
	uint64_t watched = 0, again = 0;

	r->peeked = true;
	*rc = r->log.ops->get(r->log.ctx, r->dirty);
	for (uint64_t i = 0; i < r->words; i++) {
		if (!*rc) {
			r->pending[i] |= r->dirty[i] & r->watched[i];
			again += (uint64_t)__builtin_popcountll(r->pending[i]);
		}
		watched += (uint64_t)__builtin_popcountll(r->watched[i]);
		r->dirty[i] = 0; /* (round 0 keeps it clear between pieces) */
	}
	return !*rc && (double)again > ROUNDS_GIVE_UP * (double)watched;
}

/* The piece [first, first + n) copied into the buffer, to the sink. In round 0 of
 * rounds that defer hot pages, all but the held ones (the pause sends those) and the
 * ones the heat says were written lately (pending: the first harvest defers those
 * written again, and the first round sends the others). */
static void rounds_send(struct rounds_copy *k, uint64_t first, uint64_t n)
{
	struct snap_rounds *r = k->r;
	uint64_t p = 0;

	if (!(k->watch && r->defer_hot)) {
		k->rc = k->sink->pages(k->sink->ctx, first, r->buf, n);
		r->pages_sent += n;
		return;
	}
	while (p < n && !k->rc) {
		uint64_t end = p, q = first + p;

		if (bits_test(r->held, q) || bits_test(r->prev, q)) {
			if (!bits_test(r->held, q))
				bits_set(r->pending, q, 1);
			p++;
			continue;
		}
		while (end < n && !bits_test(r->held, first + end) && !bits_test(r->prev, first + end))
			end++;
		k->rc = k->sink->pages(k->sink->ctx, first + p, r->buf + p * PAGE_SIZE, end - p);
		r->pages_sent += end - p;
		p = end;
	}
}

/* Pages [first, first + n) into the image, a buffer at a time: copied first, so that
 * the bytes written and their checksum are the same whatever the guest does meanwhile
 * (a page it writes during the copy is in the log, and goes again). */
static void rounds_copy_run(void *ctx, uint64_t first, uint64_t n)
{
	struct rounds_copy *k = ctx;
	const uint64_t per = ROUNDS_BUF / PAGE_SIZE;

	first += k->base;

	while (n && !k->rc && !k->done) {
		uint64_t take = n < per ? n : per;

		rounds_pace(k->r, k->stop);
		if (__atomic_load_n(k->stop, __ATOMIC_ACQUIRE)) {
			k->rc = -ECANCELED;
			return;
		}
		/* (after the pace: the pages sent so far have been watched that long) */
		if (k->watch && k->r->may_give_up && !k->r->peeked &&
		    k->r->pages_sent >= rounds_peek_pages(k->r) &&
		    (k->done = k->r->gave_up = rounds_hopeless(k->r, &k->rc)))
			return;
		if (k->rc)
			return;
		if (k->watch) {
			k->rc = rounds_watch_piece(k->r, first, take);
			if (k->rc)
				return;
		}
		memcpy(k->r->buf, k->r->mem->host + first * PAGE_SIZE, take * PAGE_SIZE);
		rounds_send(k, first, take);
		first += take;
		n -= take;
	}
}

/* Every run of pages set in the dirty bitmap. */
static void rounds_copy_dirty(struct rounds_copy *k)
{
	const struct snap_rounds *r = k->r;

	for (uint64_t p = 0, e; !k->rc && (e = bits_run(r->dirty, &p, r->pages, true)) > p; p = e)
		rounds_copy_run(k, p, e - p);
}

/* The log and the marks on, then the writers paused once: whatever pointer into
 * memory was handed out before the marks is used up (a call blocked in a host call
 * is marked from its ranges instead, gmem_wait_begin). */
static int rounds_start(struct snap_rounds *r, const struct rounds_writers *w)
{
	int rc;

	memset(r->marks, 0, r->words * sizeof(uint64_t));
	rc = r->log.ops->logging(r->log.ctx, true);
	if (rc)
		return rc;
	r->logging = true;
	gmem_mark_start(r->mem, r->marks);
	r->marking = true;
	rc = w->pause(w->ctx);
	if (rc)
		return rc;
	w->resume(w->ctx);
	return 0;
}

/* The hottest pages, as many as @max: held back from the rounds. */
static uint64_t rounds_hold(struct snap_rounds *r, uint64_t max)
{
	uint64_t n = max && r->tracker ? tracker_hot_pages(r->tracker, r->hot, max) : 0;

	memset(r->held, 0, r->words * sizeof(uint64_t));
	for (uint64_t i = 0; i < n; i++)
		if (r->hot[i] < r->pages)
			r->held[r->hot[i] / 64] |= 1ULL << (r->hot[i] % 64);
	return n;
}

/* defer_hot: the first harvest's "last one" is the heat's, the pages the tracker saw
 * written lately: one of those written during round 0 is as hot as one written in
 * two harvests running. */
static void rounds_history(struct snap_rounds *r)
{
	uint64_t n = r->defer_hot && r->tracker ? tracker_hot_pages(r->tracker, r->hot, r->pages) : 0;

	memset(r->prev, 0, r->words * sizeof(uint64_t));
	for (uint64_t i = 0; i < n; i++)
		if (r->hot[i] < r->pages)
			bits_set(r->prev, r->hot[i], 1);
}

/* The log's pages written since watched, of those watched: into dirty (and seen), *@n
 * of them. With defer_hot, a page written in this harvest and the last one is hot:
 * deferred to the pause, never watched nor sent again (the log goes on reporting it),
 * and left out of dirty; *@left counts those too. */
static int rounds_harvest(struct snap_rounds *r, uint64_t *n, uint64_t *left)
{
	int rc = r->log.ops->get(r->log.ctx, r->dirty);

	*n = *left = 0;
	for (uint64_t i = 0; i < r->words && !rc; i++) {
		r->dirty[i] &= r->watched[i];
		if (r->defer_hot) {
			r->seen[i] |= r->dirty[i];
			r->deferred[i] |= r->dirty[i] & r->prev[i];
			r->prev[i] = r->dirty[i];
			r->dirty[i] = (r->dirty[i] | r->pending[i]) & ~r->deferred[i];
			*left += (uint64_t)__builtin_popcountll(r->deferred[i]);
		} else { /* (round 0's look took these off the log) */
			r->dirty[i] |= r->pending[i];
			r->seen[i] |= r->dirty[i];
		}
		r->pending[i] = 0;
		*n += (uint64_t)__builtin_popcountll(r->dirty[i]);
	}
	*left += *n;
	return rc;
}

/* Round 0 over the regions in r->order, one after the other (cold first, for a
 * migration: what is sent early is least likely to go again). */
static int rounds_first_ordered(struct snap_rounds *r, struct rounds_copy *k)
{
	int rc = 0;

	for (uint64_t i = 0; i < r->n_order && !rc && !k->rc; i++) {
		uint64_t first = (uint64_t)r->order[i] * r->region_pages, n = r->region_pages;

		if (first >= r->pages)
			continue;
		if (n > r->pages - first)
			n = r->pages - first;
		k->base = first;
		rc = resident_scan(r->mem->host + first * PAGE_SIZE, n * PAGE_SIZE,
				   rounds_copy_run, k);
	}
	k->base = 0;
	return rc ? rc : k->rc;
}

/* Round 0: all that holds data, each piece watched as it goes; page_ns learnt from
 * its pace when asked. */
static int rounds_first(struct snap_rounds *r, struct rounds_copy *k, uint64_t *page_ns)
{
	uint64_t t0 = mono_ns();
	int rc = r->order ? rounds_first_ordered(r, k) :
			    resident_scan(r->mem->host, r->mem->size, rounds_copy_run, k);

	rc = rc ? rc : k->rc;
	if (!rc && k->sink->first_done)
		rc = k->sink->first_done(k->sink->ctx);
	if (!rc && r->learn_page_ns && r->pages_sent)
		*page_ns = r->page_ns = (mono_ns() - t0) / r->pages_sent + 1;
	return rc;
}

/* defer_hot: the last round (@sent pages) took less off the pause's pages (@before,
 * now @after) than ROUNDS_WORTH of what it sent. */
static bool rounds_unworthy(const struct snap_rounds *r, uint64_t sent, uint64_t before,
			    uint64_t after)
{
	if (!r->defer_hot || before == UINT64_MAX)
		return false;
	return after >= before || (double)(before - after) < ROUNDS_WORTH * (double)sent;
}

int rounds_run(struct snap_rounds *r, const struct rounds_sink *sink,
	       const struct rounds_writers *w, uint64_t budget_ns, const bool *stop)
{
	struct rounds_copy k = { .r = r, .sink = sink, .stop = stop, .watch = true };
	uint64_t page_ns = r->page_ns ? r->page_ns : ROUNDS_PAGE_NS_GUESS, last = UINT64_MAX;
	uint64_t last_left = UINT64_MAX;
	unsigned max = r->max_rounds ? r->max_rounds : ROUNDS_MAX;
	int rc;

	r->rounds = r->pages_sent = r->pages_redirtied = 0;
	r->converged = r->gave_up = r->peeked = false;
	r->t_start_ns = r->t_round_ns = mono_ns();
	rc = rounds_alloc(r);
	if (rc)
		return rc;
	r->n_held = rounds_hold(r, budget_ns / ROUNDS_LEFT_SHARE / page_ns);
	memset(r->watched, 0, r->words * sizeof(uint64_t));
	memset(r->seen, 0, r->words * sizeof(uint64_t));
	memset(r->dirty, 0, r->words * sizeof(uint64_t));
	memset(r->deferred, 0, r->words * sizeof(uint64_t));
	memset(r->pending, 0, r->words * sizeof(uint64_t));
	rounds_history(r);
	rc = rounds_start(r, w);
	if (!rc)
		rc = rounds_first(r, &k, &page_ns);
	k.watch = false;
	for (r->rounds = 1; !rc && !r->gave_up; r->rounds++) {
		uint64_t n, left, t0 = mono_ns();

		rc = rounds_harvest(r, &n, &left);
		if (!rc && r->on_round)
			rc = r->on_round(r->hook_ctx, r, n, left, t0 - r->t_round_ns);
		r->t_round_ns = t0;
		r->converged = left * page_ns <= budget_ns / ROUNDS_LEFT_SHARE;
		if (rc || r->converged || r->rounds >= max || !n ||
		    (double)n > ROUNDS_CONVERGING * (double)last ||
		    rounds_unworthy(r, last, last_left, left))
			break;
		last = n;
		last_left = left;
		rc = r->log.ops->watch(r->log.ctx, r->dirty);
		if (!rc)
			rounds_copy_dirty(&k);
		rc = rc ? rc : k.rc;
	}
	return rc;
}

/* Resident pages never watched nor held: into the bitmap of rounds_left. */
struct rounds_unwatched {
	struct snap_rounds *r;
	uint64_t *out;
};

static void rounds_left_run(void *ctx, uint64_t first, uint64_t n)
{
	struct rounds_unwatched *u = ctx;

	for (uint64_t p = first; p < first + n; p++)
		if (!bits_test(u->r->watched, p))
			bits_set(u->out, p, 1);
}

int64_t rounds_left(struct snap_rounds *r, uint64_t *out)
{
	struct rounds_unwatched u = { .r = r, .out = out };
	int64_t n = 0;
	int rc;

	/* The rounds end on a harvest whose pages were not sent: those (pending ones
	 * among them, which the log does not show written) go now. */
	memcpy(out, r->dirty, r->words * sizeof(uint64_t));
	rc = r->log.ops->get(r->log.ctx, r->dirty);
	if (rc)
		return rc;
	gmem_mark_held(r->mem);
	for (uint64_t i = 0; i < r->words; i++)
		out[i] |= (r->dirty[i] & r->watched[i]) | r->held[i] | r->pending[i] |
			  __atomic_load_n(&r->marks[i], __ATOMIC_ACQUIRE);
	rc = resident_scan(r->mem->host, r->mem->size, rounds_left_run, &u);
	if (rc)
		return rc;
	for (uint64_t i = 0; i < r->words; i++)
		n += __builtin_popcountll(out[i]);
	return n;
}

/* The log's last word before the instant: what it says was written since, into dirty
 * and seen; the marks of calls blocked in host calls too. */
static void rounds_last_harvest(struct snap_rounds *r)
{
	/* Unreadable, the log says every page was written: none is kept, none is lost. */
	if (r->log.ops->get(r->log.ctx, r->dirty))
		memset(r->dirty, 0xff, r->words * sizeof(uint64_t));
	for (uint64_t i = 0; i < r->words; i++) {
		r->dirty[i] |= r->pending[i]; /* round 0's look, or (defer_hot) never sent */
		r->pending[i] = 0;
		r->seen[i] |= r->dirty[i] & r->watched[i];
	}
	gmem_mark_held(r->mem);
}

/* Page @p may have been written since its last round (a page never watched reads as
 * written: held, or present only since). */
static bool rounds_written(const struct snap_rounds *r, uint64_t p)
{
	return bits_test(r->dirty, p) || !bits_test(r->watched, p) ||
	       (__atomic_load_n(&r->marks[p / 64], __ATOMIC_ACQUIRE) >> (p % 64) & 1);
}

/* Pages a monitor's thread may still mark while paused (a host call that ends): room
 * for them beyond what the marks say at the settle. */
#define ROUNDS_SLOT_SLACK 64

int rounds_settle(struct snap_rounds *r, struct img_writer *img)
{
	uint64_t n = ROUNDS_SLOT_SLACK;

	rounds_last_harvest(r);
	r->settled = true;
	for (uint64_t p = 0; p < r->pages; p++)
		if (img_patch_needed(img, p) && (rounds_written(r, p) || !img_precopied(img, p)))
			n++;
	return img_precopy_reserve(img, n);
}

uint64_t rounds_instant(struct snap_rounds *r, struct snap_ptab *pt, struct img_writer *img,
			uint32_t *out, uint64_t max)
{
	uint64_t n = 0;

	if (!r->settled)
		rounds_last_harvest(r);
	r->settled = false;
	for (uint64_t p = 0; p < r->pages; p++) {
		bool written;

		if (ps_get(&pt->state[p]) != PS_PROTECTED)
			continue;
		written = rounds_written(r, p);
		if (!written && img_precopied(img, p)) {
			img_precopy_keep(img, p);
			ps_set(&pt->state[p], PS_SAVED);
			continue;
		}
		r->pages_redirtied += img_precopied(img, p);
		if (n < max)
			out[n++] = (uint32_t)p;
	}
	r->pages_left = n;
	return n;
}

uint64_t rounds_pause_pages(const struct snap_rounds *r, uint64_t budget_ns, uint64_t page_ns)
{
	uint64_t expect = r->pages_left + r->pages_left / 2;
	uint64_t least = page_ns ? budget_ns / ROUNDS_LEFT_SHARE / page_ns : UINT64_MAX;

	if (!r->pages_left)
		return 0;
	return expect > least ? expect : least;
}

void rounds_end(struct snap_rounds *r)
{
	if (r->marking)
		gmem_mark_stop(r->mem);
	r->marking = false;
	if (r->logging)
		r->log.ops->logging(r->log.ctx, false);
	r->logging = false;
}
