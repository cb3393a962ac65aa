/*
 * migsend.c - a migration's memory while its writers run: the pre-copy rounds of
 * precopy.c aimed at a migration stream (migstream.c), then the pause's rest.
 *
 * Coverage-aware, the default: round 0 goes region by region, the coldest by the
 * tracker's coverage first, so that what goes early is least likely to go again; the
 * pages the heat says were written lately wait for the first harvest, which sends
 * the ones not written since and defers the others; a page written in two harvests
 * running is deferred too, never watched nor sent again before the pause (each copy
 * of it would be stale by the next round). Plain, for comparison: address order,
 * every dirty page again each round, as peers' pre-copy does.
 */
#include "migsend.h"
#include "../mmu/resident.h"
#include "../mmu/tracker.h"
#include "../base/bits.h"
#include "../base/mono.h"
#include "../base/pages.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MIG_NS_PER_MS 1000000ULL
/* Coverage is ranked over this much guest time: about what a round 0 takes. */
#define MIG_COVERAGE_S 1.0
/* Post-copy pushes this much at a time, then answers the destination's requests: what
 * a faulting vCPU waits behind. */
#define MIG_PUSH_PIECE (256ULL << 10)

static int mig_sink(void *ctx, uint64_t pfn, const void *data, uint64_t n)
{
	return mig_send_pages(ctx, data, pfn * PAGE_SIZE, n * PAGE_SIZE);
}

/* After each round's harvest: the round's marker on the stream, the progress. */
static int mig_round(void *ctx, const struct snap_rounds *r, uint64_t dirty, uint64_t left,
		     uint64_t ns)
{
	struct mig_precopy *p = ctx;
	struct mig_progress pr = {
		.round = r->rounds, .bytes_sent = p->o->bytes_sent, .dirty_pages = left,
		.dirty_rate = ns ? (uint64_t)((double)dirty * PAGE_SIZE * 1e9 / (double)ns) : 0,
		.expected_downtime_ms = left * r->page_ns / MIG_NS_PER_MS,
	};

	if (p->opts.progress)
		p->opts.progress(p->opts.ctx, &pr);
	return mig_send_round(p->o, r->rounds);
}

static int mig_cmp_cov(const void *a, const void *b, void *cov_)
{
	const double *cov = cov_;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (cov[x] != cov[y])
		return cov[x] < cov[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Round 0's order: regions by the coverage the tracker expects, coldest first. */
static int mig_order(struct mig_precopy *p, struct tracker *t)
{
	uint64_t n = t ? t->cov.n_regions : 0;
	double *cov;

	if (!n)
		return 0;
	cov = calloc(n, sizeof(*cov));
	p->order = calloc(n, sizeof(*p->order));
	if (!cov || !p->order) {
		free(cov);
		return -ENOMEM;
	}
	n = tracker_region_coverage(t, MIG_COVERAGE_S, cov, n);
	for (uint64_t i = 0; i < n; i++)
		p->order[i] = (uint32_t)i;
	qsort_r(p->order, n, sizeof(*p->order), mig_cmp_cov, cov);
	free(cov);
	p->r.order = p->order;
	p->r.n_order = n;
	p->r.region_pages = t->cov.region_size / PAGE_SIZE;
	return 0;
}

int mig_precopy_init(struct mig_precopy *p, struct gmem *mem, struct tracker *tracker,
		     const struct tracker_log *log, struct mig_out *o,
		     const struct mig_precopy_opts *opts)
{
	memset(p, 0, sizeof(*p));
	p->o = o;
	p->opts = *opts;
	/* Plain is a plain pre-copy: no heat, nothing deferred. */
	rounds_init(&p->r, mem, opts->coverage ? tracker : NULL);
	p->r.log = *log;
	p->r.max_rounds = opts->max_rounds;
	p->r.rate = opts->bandwidth;
	p->r.learn_page_ns = true;
	p->r.defer_hot = opts->coverage;
	p->r.on_round = mig_round;
	p->r.hook_ctx = p;
	p->left = calloc(p->r.words ? p->r.words : 1, sizeof(uint64_t));
	if (!p->left)
		return -ENOMEM;
	return opts->coverage ? mig_order(p, tracker) : 0;
}

void mig_precopy_fini(struct mig_precopy *p)
{
	rounds_fini(&p->r);
	free(p->order);
	free(p->left);
	p->order = NULL;
	p->left = NULL;
}

int mig_precopy_rounds(struct mig_precopy *p, const struct rounds_writers *w,
		       uint64_t downtime_ns, const bool *stop)
{
	return rounds_run(&p->r, &(struct rounds_sink){ .pages = mig_sink, .ctx = p->o }, w,
			  downtime_ns, stop);
}

int mig_precopy_rest(struct mig_precopy *p)
{
	int64_t n = rounds_left(&p->r, p->left);
	int rc = 0;

	if (n < 0)
		return (int)n;
	p->pages_paused = (uint64_t)n;
	for (uint64_t at = 0, e; !rc && (e = bits_run(p->left, &at, p->r.pages, true)) > at; at = e)
		rc = mig_send_memory(p->o, p->r.mem->host, at * PAGE_SIZE, (e - at) * PAGE_SIZE);
	return rc;
}

void mig_precopy_end(struct mig_precopy *p)
{
	rounds_end(&p->r);
}

struct mig_resident {
	struct mig_out *o;
	const uint8_t *mem;
	int rc;
};

static void mig_resident_run(void *ctx, uint64_t first, uint64_t n)
{
	struct mig_resident *k = ctx;

	if (!k->rc)
		k->rc = mig_send_memory(k->o, k->mem, first * PAGE_SIZE, n * PAGE_SIZE);
}

int mig_send_resident(struct mig_out *o, const uint8_t *mem, uint64_t size)
{
	struct mig_resident k = { .o = o, .mem = mem };
	int rc = resident_scan(mem, size, mig_resident_run, &k);

	return rc ? rc : k.rc;
}

/* ---- post-copy ---- */

struct mig_push {
	struct mig_out *o;
	const uint8_t *mem;
	uint64_t *need, pages;
	bool ended, done;
	struct mig_push_state *st;
	char *why;
};

/* One message from the destination: a block asked for is sent at once. */
static int mig_push_answer(struct mig_push *k)
{
	enum mig_ack_code code;
	uint64_t gpa, len;
	int rc = mig_read_msg(k->o->fd, k->o->ram_size, &code, &gpa, k->why);

	if (rc)
		return rc;
	switch (code) {
	case MIG_ACK_PAGE:
		if (k->ended)
			return 0; /* asked before END: its block came with the rest */
		len = k->o->ram_size - gpa < MIG_BLOCK ? k->o->ram_size - gpa : MIG_BLOCK;
		bits_clear(k->need, gpa / PAGE_SIZE, len / PAGE_SIZE);
		k->st->requests++;
		rc = mig_send_memory(k->o, k->mem, gpa, len);
		return rc ? rc : mig_flush(k->o); /* a vCPU waits for it */
	case MIG_ACK_RUNNING:
		k->st->running = true;
		k->st->t_running_ns = mono_ns();
		if (k->st->on_running)
			k->st->on_running(k->st->ctx);
		return 0;
	case MIG_ACK_REFUSED:
		return -EPROTO;
	case MIG_ACK_DONE:
		if (!k->ended)
			return -EPROTO;
		k->done = true;
		return 0;
	default:
		return 0;
	}
}

/* Whatever the destination sent by now. */
static int mig_push_serve(struct mig_push *k)
{
	int rc = 0;

	while (!rc && mig_io_readable(k->o->fd))
		rc = mig_push_answer(k);
	return rc;
}

/* The pages of region @r (of @region_pages) still needed, a piece at a time. */
static int mig_push_region(struct mig_push *k, uint64_t r, uint64_t region_pages)
{
	const uint64_t piece = MIG_PUSH_PIECE / PAGE_SIZE;
	uint64_t p = r * region_pages, end_r = p + region_pages, e;
	int rc = 0;

	if (end_r > k->pages)
		end_r = k->pages;
	for (; !rc && (e = bits_run(k->need, &p, end_r, true)) > p; p = e) {
		if (e - p > piece)
			e = p + piece;
		bits_clear(k->need, p, e - p);
		rc = mig_send_memory(k->o, k->mem, p * PAGE_SIZE, (e - p) * PAGE_SIZE);
		if (!rc)
			rc = mig_flush(k->o);
		if (!rc)
			rc = mig_push_serve(k);
	}
	return rc;
}

int mig_postcopy_push(struct mig_out *o, const uint8_t *mem, uint64_t *need,
		      const struct mig_precopy *p, struct mig_push_state *st,
		      char why[MIG_WHY_MAX])
{
	struct mig_push k = { .o = o, .mem = mem, .need = need, .pages = o->ram_size / PAGE_SIZE,
			      .st = st, .why = why };
	bool ordered = p && p->order;
	uint64_t region_pages = ordered ? p->r.region_pages : HUGE_SIZE / PAGE_SIZE;
	uint64_t n = ordered ? p->r.n_order : (k.pages + region_pages - 1) / region_pages;
	int rc = 0;

	st->running = false;
	st->requests = 0;
	why[0] = '\0';
	for (uint64_t i = 0; i < n && !rc; i++) /* the hottest regions first */
		rc = mig_push_region(&k, ordered ? p->order[n - 1 - i] : i, region_pages);
	for (uint64_t r = 0; ordered && !rc && r * region_pages < k.pages; r++)
		rc = mig_push_region(&k, r, region_pages); /* regions the order left out */
	if (!rc)
		rc = mig_send_end(o);
	k.ended = true;
	while (!rc && !(k.done && st->running))
		rc = mig_push_answer(&k);
	return rc;
}

static void mig_bitmap_run(void *ctx, uint64_t first, uint64_t n)
{
	bits_set(ctx, first, n);
}

int mig_resident_bitmap(const uint8_t *mem, uint64_t size, uint64_t *bits)
{
	return resident_scan(mem, size, mig_bitmap_run, bits);
}
