/*
 * cow_pause.c - what copy-on-write does while the writers of memory are paused: the
 * pages copied in the pause (--precopy eager) and the write protection of the rest.
 *
 * Within --pause-budget-ms, counted from the pause's start, and only into pool memory
 * faulted in before it (a first touch costs ~11 us a page here, as much as 20 copies):
 * hot regions whole, then the pages the tracker saw written recently, hottest first
 * (mmu/heat.h), then, when all the rest fits the pool and the time, every other present
 * page, so that the snapshot takes no fault at all. A page copied here is never
 * protected, so the guest never traps on it. Protecting the rest costs a call per run
 * of pages between copies (about 3 us each on plain memory, where each splits a host
 * huge page; about 0.1-1 us in our VMs), so the copy stops where the copies made so far,
 * with their runs of protection at the cost measured last (planned a quarter higher),
 * would end the pause past its budget.
 */
#include "cow_impl.h"
#include "../vmm/base/mono.h"
#include "../vmm/base/pages.h"

#include <errno.h>
#include <string.h>

/* Protect pages [from, to): -errno from userfaultfd. */
static int cow_protect_run(struct snap_cow *c, uint64_t from, uint64_t to)
{
	if (to <= from)
		return 0;
	return uffd_protect(&c->wp, from * PAGE_SIZE, (to - from) * PAGE_SIZE, true);
}

/* A cost estimate @avg (0: none yet) with the new measure @x: up at once, down slowly,
 * as what it bounds must not be exceeded. */
static uint64_t cow_average(uint64_t avg, uint64_t x)
{
	if (!avg || x >= avg)
		return x;
	return avg - (avg - x) / COST_WEIGHT;
}

/* Protecting took @ns in @runs extra runs: what a run and the base call cost. */
static void cow_protect_cost(struct snap_cow *c, uint64_t ns, uint64_t runs)
{
	if (!runs)
		c->protect_base_ns = cow_average(c->protect_base_ns, ns);
	else if (runs >= COST_MIN_RUNS)
		c->run_ns = cow_average(c->run_ns, ns > c->protect_base_ns ?
					       (ns - c->protect_base_ns) / runs : 1);
}

/* Write-protect all memory except the pages copied during the pause (the only pages
 * COPIED before the resume), in as few calls as there are runs between them. */
int cow_protect(struct snap_cow *c)
{
	uint64_t run = 0, t0 = mono_ns(), runs = 0;
	int rc = 0;

	for (uint64_t p = 0; c->n.pages_eager && p < c->pt->pages && !rc; p++) {
		if (c->pt->state[p] != PS_COPIED)
			continue;
		if (p > run) {
			rc = cow_protect_run(c, run, p);
			runs++;
		}
		run = p + 1;
	}
	if (!rc)
		rc = cow_protect_run(c, run, c->pt->pages);
	c->n.protect_ns = mono_ns() - t0;
	cow_protect_cost(c, c->n.protect_ns, runs);
	return rc;
}

/* Page @p copied during the pause into a ready pool page, never to be protected.
 * Returns 1 when copied, 0 when it needs no copy (not present, or copied with its
 * region), -ENOSPC when the pool has no ready page left. */
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
	track_unprotected(c->tr, p, 1); /* never protected: untracked */
	c->n.pages_copied++;
	c->n.pages_precopied++;
	c->n.pages_eager++;
	c->splits++;
	return 1;
}

/* Hot region @r copied whole in the pause into a ready slot (never a first touch
 * here: the pool was faulted in before the pause). False when no slot is ready. */
static bool cow_eager_region(struct snap_cow *c, uint64_t r)
{
	uint64_t first, end, before = c->n.pages_copied;

	plan_region_pages(c->pl, r, &first, &end);
	if (cow_region_protected(c, first, end)) {
		if (!cow_copy_region(c, r, false, false))
			return false;
		track_unprotected(c->tr, first, end - first); /* never protected: untracked */
		c->splits++;
	} /* (else nothing to copy: done all the same) */
	c->pl->eager[r] = 1;
	c->n.regions_eager++;
	c->n.pages_eager += c->n.pages_copied - before;
	return true;
}

/* The clock, read every EAGER_CLOCK_EVERY copies only: would the pause, with the
 * protection still to come, end past @until_ns? Every copy so far may split a run of
 * protection in two, and each run is one more call. */
static bool cow_eager_late(const struct snap_cow *c, uint64_t i, uint64_t until_ns)
{
	return i % EAGER_CLOCK_EVERY == 0 &&
	       mono_ns() + c->protect_base_ns + (c->splits + 1) * c->run_ns * COST_MARGIN_PCT / 100 >=
		       until_ns;
}

/* Hot regions, in the writer's order, while slots are ready and time is left. */
static void cow_eager_regions(struct snap_cow *c, uint64_t until_ns)
{
	const struct snap_plan *pl = c->pl;

	for (uint64_t i = 0; i < pl->chunks; i++) {
		uint64_t r0, r1;

		plan_chunk_regions(pl, pl->order[i], &r0, &r1);
		for (uint64_t r = r0; r <= r1; r++) {
			if (!pl->hot[r] || pl->eager[r])
				continue;
			if (mono_ns() >= until_ns || !cow_eager_region(c, r))
				return;
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
static bool cow_eager_hot_pages(struct snap_cow *c, uint64_t until_ns)
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
		if (left <= keep || cow_eager_late(c, i, until_ns))
			return false;
		rc = cow_eager_page(c, p);
		if (rc < 0)
			return false;
		left -= (size_t)rc;
	}
	return true;
}

/* When what is left fits the ready pool and, at the rate the hot pages were copied,
 * the time left: every other present page too, so that nothing present is protected
 * and the snapshot takes no fault at all (a stop that copies instead of writing). The
 * pages absent at the instant stay protected (for write tracking): a call per run of
 * them. */
static void cow_eager_rest(struct snap_cow *c, uint64_t until_ns)
{
	uint64_t left = 0, runs = 0, now = mono_ns();
	bool in_hole = false;

	for (uint64_t p = 0; p < c->pt->pages; p++) {
		uint8_t st = c->pt->state[p];

		left += st == PS_PROTECTED;
		runs += st == PS_ZERO && !in_hole;
		in_hole = st == PS_ZERO;
	}
	if (!left || left > pool_free_pages(c->pool) ||
	    now + left * c->page_ns + c->protect_base_ns + runs * c->run_ns > until_ns)
		return;
	for (uint64_t p = 0, i = 0; p < c->pt->pages; p++) {
		if (c->pt->state[p] != PS_PROTECTED)
			continue;
		if ((++i % EAGER_CLOCK_EVERY == 0 && mono_ns() >= until_ns) ||
		    cow_eager_page(c, p) < 0)
			return;
	}
}

void cow_precopy_eager(struct snap_cow *c, uint64_t t_start_ns, uint64_t budget_ns)
{
	uint64_t t0 = mono_ns(), until = t_start_ns + budget_ns, pages;

	c->splits = 0;
	if (t0 < until) {
		cow_eager_regions(c, until);
		pages = c->n.pages_eager;
		if (cow_eager_hot_pages(c, until))
			cow_eager_rest(c, until);
		pages = c->n.pages_eager - pages;
		if (pages >= EAGER_RATE_MIN)
			c->page_ns = cow_average(c->page_ns, (mono_ns() - t0) / pages);
	}
	c->n.pause_copy_ns = mono_ns() - t0;
}
