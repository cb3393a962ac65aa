/*
 * cow_pause.c - what copy-on-write does while the writers of memory are paused: the
 * write protection, and the pages copied in the pause (--precopy eager).
 *
 * All memory is write-protected first, in one call. Then, within --pause-budget-ms
 * counted from the pause's start, and only into pool memory faulted in before it (a
 * first touch costs ~11 us a page here, as much as 20 copies): hot regions whole, then
 * the pages the tracker saw written recently, hottest first (mmu/heat.h), then, when
 * all the rest fits the pool and the time, every other present page, so that the
 * snapshot takes no fault at all. Each copy has its protection lifted at once (a run of
 * neighbours in one call), so the guest never traps there. Lifting costs about as much
 * as copying (a call, a few microseconds where it splits a host huge page), and it
 * varied threefold between snapshots in our VMs: a cost planned ahead overshot the
 * budget by half, so the clock is read as the copies go, every EAGER_CLOCK_EVERY pages,
 * and the copy stops at the budget less what one more step took.
 */
#include "cow_impl.h"
#include "../base/mono.h"
#include "../base/pages.h"

#include <errno.h>
#include <string.h>

/* Register all of the memory again: a range the guest's shared mappings mapped anew
 * on the host (gmem_alias) since the last pause left the registration. In the pause,
 * when no system call maps anything. */
static int cow_register(struct snap_cow *c)
{
	return uffd_register(&c->wp, 0, c->size);
}

int cow_protect(struct snap_cow *c)
{
	uint64_t t0 = mono_ns();
	int rc = cow_register(c);

	if (!rc)
		rc = uffd_protect(&c->wp, 0, c->size, true);

	c->n.protect_ns = mono_ns() - t0;
	return rc;
}

int cow_protect_rest(struct snap_cow *c)
{
	uint64_t t0 = mono_ns(), run = 0;
	bool in_run = false;
	int rc = cow_register(c);

	for (uint64_t p = 0; p <= c->pt->pages && !rc; p++) {
		bool prot = p < c->pt->pages && ps_get(&c->pt->state[p]) == PS_PROTECTED;

		if (prot && !in_run)
			run = p;
		if (!prot && in_run)
			rc = uffd_protect(&c->wp, run * PAGE_SIZE, (p - run) * PAGE_SIZE, true);
		in_run = prot;
	}
	c->n.protect_ns += mono_ns() - t0;
	return rc;
}

/* Lift the protection of pages [from, to), copied in the pause: they are then written
 * without a trap, and tracked as written. A lift that covers part of a huge page splits
 * it on the host: marked, so that the engine puts it back together afterwards
 * (ptab_collapse_split), or the guest would run on small pages from then on. */
static int cow_lift(struct snap_cow *c, uint64_t from, uint64_t to)
{
	const uint64_t per = HUGE_SIZE / PAGE_SIZE;

	if (to <= from || c->unprotected)
		return 0;
	for (uint64_t h = from / per; h <= (to - 1) / per; h++)
		if (from > h * per || to < (h + 1) * per)
			c->pt->split[h] = 1;
	track_unprotected(c->tr, from, to - from);
	return uffd_protect(&c->wp, from * PAGE_SIZE, (to - from) * PAGE_SIZE, false);
}

/* Page @p copied during the pause into a ready pool page (its protection is lifted by
 * the caller). Returns 1 when copied, 0 when it needs no copy (not present, or copied
 * with its region), -ENOSPC when the pool has no ready page left. */
static int cow_eager_page(struct snap_cow *c, uint64_t p)
{
	uint8_t *st = &c->pt->state[p];
	void *buf;

	if (ps_get(st) != PS_PROTECTED)
		return 0;
	buf = pool_get_page(c->pool);
	if (!buf)
		return -ENOSPC;
	memcpy(buf, c->host + p * PAGE_SIZE, PAGE_SIZE);
	if (!ps_take(st, PS_COPYING)) { /* (nobody else runs in the pause) */
		pool_put(c->pool, buf);
		return 0;
	}
	c->pt->copy[p] = buf;
	c->pt->pre[p] = 1; /* observe.c tells at the end whether it was written */
	ps_set(st, PS_COPIED);
	c->n.pages_copied++;
	c->n.pages_precopied++;
	c->n.pages_eager++;
	return 1;
}

/* The budget's end less the longest step seen so far: is there time for one more? */
struct eager_clock {
	uint64_t until, last, step;
};

static bool eager_time_left(struct eager_clock *k)
{
	uint64_t now = mono_ns();

	if (now - k->last > k->step)
		k->step = now - k->last;
	k->last = now;
	return now + k->step < k->until;
}

/* Hot regions, in the writer's order, while slots are ready and time is left: each
 * copied whole with one memcpy and unprotected in one call (cow_copy_region). */
static void cow_eager_regions(struct snap_cow *c, struct eager_clock *k)
{
	const struct snap_plan *pl = c->pl;

	for (uint64_t i = 0; i < pl->chunks; i++) {
		uint64_t r0, r1;

		plan_chunk_regions(pl, pl->order[i], &r0, &r1);
		for (uint64_t r = r0; r <= r1; r++) {
			uint64_t first, end, before = c->n.pages_copied;

			if (!pl->hot[r] || pl->eager[r])
				continue;
			if (!eager_time_left(k))
				return;
			plan_region_pages(pl, r, &first, &end);
			if (cow_region_protected(c, first, end) && !cow_copy_region(c, r, false, true))
				return; /* no slot to spare */
			c->pl->eager[r] = 1; /* (with nothing to copy, done all the same) */
			c->n.regions_eager++;
			c->n.pages_eager += c->n.pages_copied - before;
		}
	}
}

/* Pages still protected (present at the instant, not copied yet). */
static uint64_t cow_protected_pages(const struct snap_cow *c)
{
	uint64_t n = 0;

	for (uint64_t p = 0; p < c->pt->pages; p++)
		n += c->pt->state[p] == PS_PROTECTED;
	return n;
}

/* The hot pages, hottest first, leaving an eighth of the ready pool (POOL_MIN_RESERVE
 * at most) to faults, unless the pool could take every page still protected. Returns
 * false when time or the pool ran out before the list did. */
static bool cow_eager_hot_pages(struct snap_cow *c, struct eager_clock *k)
{
	const struct snap_plan *pl = c->pl;
	size_t left = pool_free_pages(c->pool), keep = left / POOL_RESERVE_DIV;

	if (keep > POOL_MIN_RESERVE / PAGE_SIZE)
		keep = POOL_MIN_RESERVE / PAGE_SIZE;
	if (cow_protected_pages(c) <= left)
		keep = 0; /* no fault needs a buffer if all of it is copied */
	for (uint64_t i = 0; i < pl->n_hot_pages; i++) {
		uint64_t p = pl->hot_pages[i];
		int rc;

		if (p >= c->pt->pages)
			continue;
		if (left <= keep || (i % EAGER_CLOCK_EVERY == 0 && !eager_time_left(k)))
			return false;
		rc = cow_eager_page(c, p);
		if (rc < 0)
			return false;
		if (rc > 0 && cow_lift(c, p, p + 1))
			return false;
		left -= (size_t)rc;
	}
	return true;
}

/* When what is left fits the ready pool and, at the rate pages were copied so far, the
 * time left: every other present page too, a run of neighbours unprotected at a time,
 * so that nothing present stays protected and the snapshot takes no fault at all (a
 * stop that copies instead of writing). */
static void cow_eager_rest(struct snap_cow *c, struct eager_clock *k, uint64_t t0)
{
	uint64_t left = cow_protected_pages(c), copied = c->n.pages_eager, run = 0, n = 0;
	uint64_t per = copied >= EAGER_RATE_MIN ? (mono_ns() - t0) / copied : c->page_ns;
	bool in_run = false;

	if (!left || left > pool_free_pages(c->pool) || mono_ns() + left * per > k->until)
		return;
	for (uint64_t p = 0; p <= c->pt->pages; p++) {
		int rc = p < c->pt->pages ? cow_eager_page(c, p) : 0;

		if (rc > 0) {
			run = in_run ? run : p;
			in_run = true;
			if (++n % EAGER_CLOCK_EVERY || eager_time_left(k))
				continue;
			cow_lift(c, run, p + 1); /* out of time */
			return;
		}
		if (in_run && cow_lift(c, run, p))
			return;
		in_run = false;
		if (rc < 0)
			return;
	}
}

void cow_precopy_eager(struct snap_cow *c, uint64_t t_start_ns, uint64_t budget_ns)
{
	uint64_t t0 = mono_ns(), pages;
	struct eager_clock k = { .until = t_start_ns + budget_ns, .last = t0 };

	if (t0 < k.until) {
		cow_eager_regions(c, &k);
		pages = c->n.pages_eager;
		if (cow_eager_hot_pages(c, &k))
			cow_eager_rest(c, &k, t0);
		pages = c->n.pages_eager - pages;
		if (pages >= EAGER_RATE_MIN)
			c->page_ns = (mono_ns() - t0) / pages;
	}
	c->n.pause_copy_ns = mono_ns() - t0;
}
