/*
 * cow.c - the copy-on-write data path of a snapshot: what runs while the guest does.
 *
 * A guest write to a page still owed to the image traps (userfaultfd write
 * protection). Several fault threads serve the traps, so vCPUs that fault at once are
 * served at once. A trap in a cold page copies that page into the pool; a trap in a
 * hot region (ccow) copies the whole region into one pool slot with one memcpy and
 * lifts the protection of the region in one call, so the rest of the region costs
 * the guest no trap. Meanwhile a background copier copies the hot regions the guest
 * has not reached yet, in the writer's order, so most never trap at all; it yields
 * to any fault being served between pages and runs at a lower priority than the
 * fault threads (and the writer at a lower one still: docs/internals.md says what was
 * measured). No copy takes a lock across a memcpy that another thread waits for:
 * copies are made first and the pages taken afterwards by compare-and-swap
 * (ptab.h), so whoever loses a race just returns its buffer.
 *
 * The pool (pool.c) is faulted in by the copier, off the fault path: ahead of a
 * periodic snapshot (sized from the hot set the last one had plus a reserve for cold
 * pages), while a snapshot runs when its copies need more, and it is given back once
 * snapshots stop. A fault that finds no ready buffer saves its page itself from a copy
 * on its stack, through the sink the engine gave (struct cow_sink): slower, still
 * exact.
 */
#include "cow_impl.h"
#include "../base/log.h"
#include "../base/mono.h"
#include "../base/pages.h"
#include "../base/role.h"

#include <errno.h>
#include <stdlib.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FAULT_POLL_MS 100
#define COW_FAULT_RT_PRIORITY 1         /* the lowest real-time priority is enough */
#define POOL_GROW_STEP (32ULL << 20)    /* faulted in at once while a snapshot needs more */
#define POOL_PREPARE_MAX_S 0.5          /* a cold pool delays a snapshot's start this much */
#define POOL_KEEP_INTERVALS 3.0         /* kept for this many of the last intervals too */
#define COPIER_IDLE_MS 1000             /* how often an idle copier looks at the pool */
#define COPIER_NAP_NS 2000000L          /* its pace while topping up the reserve */
#define REGION_WAIT_NS 20000L           /* a fault waiting for another's region copy */

enum { REGION_FREE = 0, REGION_COPYING, REGION_DONE }; /* region_busy[] */

static size_t cow_ready_slots(struct snap_cow *c)
{
	return pool_ready_bytes(c->pool) / c->pool->slot_size;
}

/* Fault in one more step of the pool (POOL_GROW_STEP), up to @cap slots. Returns 0,
 * -ENOSPC when the pool already holds @cap (or all it reserved), or -errno. */
static int cow_grow_step(struct snap_cow *c, size_t cap)
{
	size_t ready = cow_ready_slots(c), step = POOL_GROW_STEP / c->pool->slot_size + 1;

	if (cap > pool_limit(c->pool))
		cap = pool_limit(c->pool);
	if (ready >= cap)
		return -ENOSPC;
	return pool_grow(c->pool, ready + step < cap ? ready + step : cap);
}

/* Slots of the ready pool that region copies leave free for single pages: an eighth,
 * but no more than the cold regions could ever need (none under CCoW-All). */
static size_t cow_reserve_slots(struct snap_cow *c)
{
	size_t ready = cow_ready_slots(c);
	size_t share = ready / POOL_RESERVE_DIV ? ready / POOL_RESERVE_DIV : 1;

	return share < c->cold_slots ? share : c->cold_slots;
}

/* Copy page @p alone: into a pool buffer, or, with none ready, saved right here from
 * a copy on the stack while the guest waits. */
static void cow_copy_page(struct snap_cow *c, uint64_t p)
{
	uint8_t *st = &c->pt->state[p], tmp[PAGE_SIZE] __attribute__((aligned(64)));
	void *buf = pool_get_page(c->pool);

	if (buf) {
		memcpy(buf, c->host + p * PAGE_SIZE, PAGE_SIZE);
		if (!ps_take(st, PS_COPYING)) {
			pool_put(c->pool, buf); /* someone else took it meanwhile */
			return;
		}
		c->pt->copy[p] = buf;
		c->pt->pre[p] = 0;
		ps_set(st, PS_COPIED);
		__atomic_fetch_add(&c->n.pages_copied, 1, __ATOMIC_RELAXED);
		return;
	}
	memcpy(tmp, c->host + p * PAGE_SIZE, PAGE_SIZE);
	if (ps_take(st, PS_CLAIMED)) {
		int rc = c->sink.save(c->sink.ctx, p, tmp);

		if (rc)
			c->sink.fail(c->sink.ctx, rc, "writing the image");
		ps_set(st, PS_SAVED);
	}
}

bool cow_region_protected(const struct snap_cow *c, uint64_t first, uint64_t end)
{
	for (uint64_t p = first; p < end; p++)
		if (ps_get(&c->pt->state[p]) == PS_PROTECTED)
			return true;
	return false;
}

/* The bytes of pages [first, end) into @slot: one memcpy on a fault path; page by page
 * for the copier, which lets a fault being served have the CPU between pages. */
static void cow_copy_bytes(struct snap_cow *c, uint8_t *slot, uint64_t first, uint64_t end,
			   bool background)
{
	if (!background) {
		memcpy(slot, c->host + first * PAGE_SIZE, (end - first) * PAGE_SIZE);
		return;
	}
	for (uint64_t p = first; p < end; p++) {
		if (__atomic_load_n(&c->faults_now, __ATOMIC_RELAXED))
			sched_yield();
		if (ps_get(&c->pt->state[p]) == PS_PROTECTED)
			memcpy(slot + (p - first) * PAGE_SIZE, c->host + p * PAGE_SIZE, PAGE_SIZE);
	}
}

/* Take the pages of [first, end) still protected as copies in @slot; returns how
 * many. */
static uint64_t cow_take_region(struct snap_cow *c, uint8_t *slot, uint64_t first, uint64_t end)
{
	uint64_t taken = 0;

	for (uint64_t p = first; p < end; p++) {
		if (!ps_take(&c->pt->state[p], PS_COPYING))
			continue;
		c->pt->copy[p] = slot + (p - first) * PAGE_SIZE;
		c->pt->pre[p] = 1;
		ps_set(&c->pt->state[p], PS_COPIED);
		taken++;
	}
	pool_unused(c->pool, slot, c->pool->slot_size / PAGE_SIZE - taken);
	return taken;
}

/*
 * Copy every page of region @r still protected into one slot and, unless @armed is
 * false (the pause, before protection), lift the protection of the whole region in
 * one call (a 2 MiB region stays one huge page on the host). False when nothing was
 * left to copy or the pool has no slot to spare.
 */
bool cow_copy_region(struct snap_cow *c, uint64_t r, bool background, bool armed)
{
	uint64_t first, end, taken;
	uint8_t *slot;

	plan_region_pages(c->pl, r, &first, &end);
	if (c->pool->slot_size < c->pl->region_size || !cow_region_protected(c, first, end))
		return false; /* (a pool smaller than a region copies pages only) */
	slot = pool_get_slot(c->pool, cow_reserve_slots(c));
	if (!slot)
		return false;
	cow_copy_bytes(c, slot, first, end, background);
	taken = cow_take_region(c, slot, first, end);
	if (armed) {
		track_unprotected(c->tr, first, end - first); /* untracked from here */
		if (uffd_protect(&c->wp, first * PAGE_SIZE, (end - first) * PAGE_SIZE, false))
			return false;
	}
	__atomic_fetch_add(&c->n.regions_precopied, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->n.pages_copied, taken, __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->n.pages_precopied, taken, __ATOMIC_RELAXED);
	if (background)
		__atomic_fetch_add(&c->n.regions_background, 1, __ATOMIC_RELAXED);
	if (c->pl->region_size < HUGE_SIZE)
		c->pt->split[first * PAGE_SIZE / HUGE_SIZE] = 1;
	return true;
}

/* A fault in hot region @r: copy the region unless another fault thread is at it
 * (then wait for it: ~0.2 ms, in naps rather than yields, which a real-time thread
 * would give only to its peers). True once the whole region is unprotected. */
static bool cow_region_fault(struct snap_cow *c, uint64_t r)
{
	struct timespec nap = { .tv_nsec = REGION_WAIT_NS };
	uint8_t *busy = &c->region_busy[r];
	bool ok;

	for (;;) {
		uint8_t expect = REGION_FREE;

		if (__atomic_compare_exchange_n(busy, &expect, REGION_COPYING, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			break;
		if (expect == REGION_DONE)
			return true;
		nanosleep(&nap, NULL);
	}
	ok = cow_copy_region(c, r, false, true);
	__atomic_store_n(busy, ok ? REGION_DONE : REGION_FREE, __ATOMIC_RELEASE);
	return ok;
}

void cow_page(struct snap_cow *c, uint64_t p, bool wake)
{
	uint64_t r = p * PAGE_SIZE / c->pl->region_size;
	uint8_t *st = &c->pt->state[p];

	if (wake && c->ccow && c->pl->hot[r] && ps_get(st) == PS_PROTECTED &&
	    cow_region_fault(c, r))
		return;
	if (ps_get(st) == PS_PROTECTED) {
		c->pt->faulted[p] = 1;
		cow_copy_page(c, p);
	}
	if (wake) {
		track_fault(c->tr, p);
		uffd_protect(&c->wp, p * PAGE_SIZE, PAGE_SIZE, false);
		c->pt->split[p / (HUGE_SIZE / PAGE_SIZE)] = 1;
	}
}

/* Count a fault in; keep the most served at once. */
static void cow_fault_in(struct snap_cow *c)
{
	uint64_t n = (uint64_t)__atomic_add_fetch(&c->faults_now, 1, __ATOMIC_ACQ_REL), m;

	__atomic_fetch_add(&c->n.cow_faults, 1, __ATOMIC_RELAXED);
	m = __atomic_load_n(&c->n.faults_parallel_max, __ATOMIC_RELAXED);
	while (n > m && !__atomic_compare_exchange_n(&c->n.faults_parallel_max, &m, n, false,
						     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	m = __atomic_load_n(&c->faults_most, __ATOMIC_RELAXED);
	while (n > m && !__atomic_compare_exchange_n(&c->faults_most, &m, n, false,
						     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* A fault thread preempts the vCPUs, the copier and the writer at once where the
 * process may use real-time scheduling (root, CAP_SYS_NICE); its work is bounded
 * (one region copy), and the kernel's real-time throttling bounds the rest. */
static void cow_fault_priority(const struct snap_cow *c)
{
	struct sched_param sp = { .sched_priority = COW_FAULT_RT_PRIORITY };

	if (c->tune->fault_rt)
		(void)sched_setscheduler(0, SCHED_FIFO, &sp); /* pid 0: this thread */
}

/* engine-bench's model of a VM host's dearer traps (snap_tuning.trap_cost_us): spun,
 * as the exits it stands for take CPU time. */
static void cow_trap_cost(const struct snap_cow *c)
{
	uint64_t until;

	if (!c->tune->trap_cost_us)
		return;
	until = mono_ns() + c->tune->trap_cost_us * 1000ULL;
	while (mono_ns() < until)
		;
}

static void *cow_fault_thread(void *arg)
{
	struct snap_cow *c = arg;
	uint64_t gpa;

	role_enter(ROLE_SNAPSHOT);
	cow_fault_priority(c);

	while (!__atomic_load_n(&c->fault_stop, __ATOMIC_ACQUIRE)) {
		int rc = uffd_next_fault(&c->wp, FAULT_POLL_MS, &gpa);

		if (rc < 0) {
			log_err("userfaultfd: %s", strerror(-rc));
			break;
		}
		if (rc == 0 || gpa >= c->size)
			continue;
		cow_fault_in(c);
		cow_trap_cost(c);
		cow_page(c, gpa / PAGE_SIZE, true);
		__atomic_sub_fetch(&c->faults_now, 1, __ATOMIC_ACQ_REL);
	}
	return NULL;
}

static bool cow_copy_on(struct snap_cow *c)
{
	return worker_wanted(&c->w);
}

/* A free slot beyond the reserve, growing the pool (first touches: the copier's
 * time, not the guest's) when there is none. */
static bool cow_slot_room(struct snap_cow *c)
{
	if (pool_free_slots(c->pool) > cow_reserve_slots(c))
		return true;
	return cow_grow_step(c, pool_limit(c->pool)) == 0 &&
	       pool_free_slots(c->pool) > cow_reserve_slots(c);
}

/* The hot regions the guest has not reached, in the writer's order (the writer is
 * behind: it waits for the disk). */
static void cow_copy_hot(struct snap_cow *c)
{
	for (uint64_t i = 0; i < c->pl->chunks && cow_copy_on(c); i++) {
		uint64_t r0, r1;

		plan_chunk_regions(c->pl, c->pl->order[i], &r0, &r1);
		for (uint64_t r = r0; r <= r1 && cow_copy_on(c); r++) {
			uint8_t expect = REGION_FREE;

			if (!c->pl->hot[r] || __atomic_load_n(&c->region_busy[r], __ATOMIC_ACQUIRE))
				continue;
			if (!cow_slot_room(c))
				return;
			if (cow_copy_region(c, r, true, true))
				__atomic_compare_exchange_n(&c->region_busy[r], &expect, REGION_DONE,
							    false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
		}
	}
}

/* Until the writer is done: keep enough ready buffers for single-page copies. */
static void cow_keep_reserve(struct snap_cow *c)
{
	struct timespec nap = { .tv_nsec = COPIER_NAP_NS };

	while (cow_copy_on(c)) {
		bool low = pool_free_pages(c->pool) * PAGE_SIZE < POOL_MIN_RESERVE;

		/* Nap when nothing is needed, or nothing more can be had. */
		if (!low || cow_grow_step(c, pool_limit(c->pool)))
			nanosleep(&nap, NULL);
	}
}

/* Between snapshots: ready for the next periodic one, or given back once they stopped. */
static void cow_pool_idle(struct snap_cow *c)
{
	double keep = POOL_KEEP_INTERVALS * c->interval_s, since;

	if (!c->last_start_s)
		return;
	since = mono_s() - c->last_start_s;
	if (since > (keep > c->tune->pool_keep_s ? keep : c->tune->pool_keep_s))
		pool_shrink(c->pool, 0);
	else if (pool_ready_bytes(c->pool) < c->pool_target * c->pool->slot_size)
		pool_grow(c->pool, c->pool_target);
}

/* While a snapshot runs: the hot regions, then the reserve until the writer is done. */
static void cow_copier_work(void *arg)
{
	cow_copy_hot(arg);
	cow_keep_reserve(arg);
}

static void *cow_copier_thread(void *arg)
{
	struct snap_cow *c = arg;

	role_enter(ROLE_SNAPSHOT);
	worker_background(c->tune->copier_nice, c->tune->background_idle);
	pthread_mutex_lock(&c->w.lock);
	while (!c->w.stop) {
		if (worker_serve(&c->w, cow_copier_work, c)) {
			pthread_mutex_unlock(&c->w.lock);
			/* Ready for the next one now: a periodic snapshot may come soon. */
			pool_grow(c->pool, c->pool_target);
			pthread_mutex_lock(&c->w.lock);
			continue;
		}
		struct timespec until;

		worker_deadline(COPIER_IDLE_MS / 1000.0, &until);
		/* Only on the timeout: the broadcasts on this condition come while a snapshot
		 * starts or ends, not a second after it. */
		if (worker_wait_until(&c->w, &until) != ETIMEDOUT || c->w.wanted || c->w.stop)
			continue;
		pthread_mutex_unlock(&c->w.lock);
		cow_pool_idle(c);
		pthread_mutex_lock(&c->w.lock);
	}
	pthread_mutex_unlock(&c->w.lock);
	return NULL;
}

/* Slots the next snapshot needs: its hot regions, its hot pages (copied in the pause
 * with --precopy eager) and room for single pages (what the last one copied page by
 * page, and a quarter more). */
static size_t cow_pool_need(struct snap_cow *c, uint64_t hot)
{
	uint64_t single = c->single_bytes + c->single_bytes / 4, need;

	if (single < POOL_MIN_RESERVE)
		single = POOL_MIN_RESERVE;
	single += c->eager_pages * PAGE_SIZE;
	need = hot + (single + c->pool->slot_size - 1) / c->pool->slot_size;
	return need < pool_limit(c->pool) ? (size_t)need : pool_limit(c->pool);
}

/* What a pause of @budget_ns can copy, at the costs measured so far, and no more than
 * the last snapshot held. */
static uint64_t cow_eager_capacity(const struct snap_cow *c, uint64_t budget_ns)
{
	uint64_t n = budget_ns / (c->page_ns ? c->page_ns : 1);

	return c->last_present && n > c->last_present ? c->last_present : n;
}

void cow_pool_prepare(struct snap_cow *c, uint64_t regions_hot, uint64_t budget_ns)
{
	double now = mono_s(), until = now + POOL_PREPARE_MAX_S;
	size_t want;

	/* First, so that an idle copier does not give the pool back meanwhile. */
	if (c->last_start_s)
		c->interval_s = now - c->last_start_s;
	c->last_start_s = now;
	c->eager_pages = budget_ns ? cow_eager_capacity(c, budget_ns) : 0;
	want = cow_pool_need(c, regions_hot);
	while (mono_s() < until) /* step by step: the budget is checked between steps */
		if (cow_grow_step(c, want))
			break;
}

void cow_pool_fit(struct snap_cow *c, uint64_t pause_pages)
{
	size_t want;

	if (pause_pages && pause_pages < c->eager_pages)
		c->eager_pages = pause_pages;
	want = cow_pool_need(c, 0);

	if (pool_ready_bytes(c->pool) > want * c->pool->slot_size)
		pool_shrink(c->pool, want);
}

void cow_pool_plan(struct snap_cow *c, bool ccow)
{
	uint64_t cold = c->pl->n_regions - c->pl->regions_hot;

	c->ccow = ccow;
	c->cold_slots = (size_t)((cold * c->pl->region_size + c->pool->slot_size - 1) /
				 c->pool->slot_size);
	pool_reset(c->pool);
	memset(c->region_busy, REGION_FREE, c->pl->n_regions);
	c->pool_target = cow_pool_need(c, c->pl->regions_hot);
}

void cow_copy_begin(struct snap_cow *c)
{
	worker_want(&c->w);
}

void cow_copy_end(struct snap_cow *c)
{
	/* What the next snapshot will need, for the copier to get ready at once. */
	c->single_bytes = (c->n.pages_copied - c->n.pages_precopied) * PAGE_SIZE;
	c->pool_target = cow_pool_need(c, c->pl->regions_hot);
	worker_unwant(&c->w);
	while (__atomic_load_n(&c->faults_now, __ATOMIC_ACQUIRE))
		sched_yield();
	c->last_present = 0;
	for (uint64_t p = 0; p < c->pt->pages; p++) { /* a save from a stack copy */
		while (ps_get(&c->pt->state[p]) == PS_CLAIMED)
			sched_yield();
		c->last_present += ps_get(&c->pt->state[p]) != PS_ZERO &&
				   ps_get(&c->pt->state[p]) != PS_PARENT;
	}
}

int cow_threads_start(struct snap_cow *c)
{
	int rc;

	if (c->wp.fd >= 0)
		return 0;
	rc = uffd_open(&c->wp, c->host, c->size, UFFD_MODE_WP);
	if (rc)
		return rc;
	for (; c->n_faulters < c->tune->fault_threads; c->n_faulters++)
		if (pthread_create(&c->faulter[c->n_faulters], NULL, cow_fault_thread, c))
			break;
	if (!c->n_faulters)
		return -EAGAIN;
	if (worker_start(&c->w, cow_copier_thread, c))
		log_warn("no copier thread: hot regions are copied on their first fault only");
	return 0;
}

void cow_threads_stop(struct snap_cow *c)
{
	if (c->wp.fd < 0)
		return;
	__atomic_store_n(&c->fault_stop, true, __ATOMIC_RELEASE);
	for (int i = 0; i < c->n_faulters; i++)
		pthread_join(c->faulter[i], NULL);
	c->n_faulters = 0;
	worker_stop(&c->w);
	uffd_close(&c->wp);
}

int cow_init(struct snap_cow *c, uint8_t *host, uint64_t size, struct snap_ptab *pt,
	     struct snap_plan *pl, struct snap_track *tr, struct pool *pool,
	     const struct snap_tuning *tune, const struct cow_sink *sink)
{
	memset(c, 0, sizeof(*c));
	*c = (struct snap_cow){ .host = host, .size = size, .pt = pt, .pl = pl, .tr = tr,
				.pool = pool, .tune = tune, .sink = *sink };
	c->wp.fd = -1;
	c->page_ns = EAGER_PAGE_NS_DEFAULT;
	worker_init(&c->w);
	c->region_busy = calloc(pl->n_regions ? pl->n_regions : 1, 1);
	return c->region_busy ? 0 : -ENOMEM;
}

void cow_fini(struct snap_cow *c)
{
	cow_threads_stop(c);
	worker_destroy(&c->w);
	free(c->region_busy);
	c->region_busy = NULL;
}

void cow_reclaim(struct snap_cow *c)
{
	for (uint64_t p = 0; p < c->pt->pages; p++)
		if (ps_get(&c->pt->state[p]) == PS_COPIED && c->pt->copy[p]) {
			pool_put(c->pool, c->pt->copy[p]);
			c->pt->copy[p] = NULL;
			ps_set(&c->pt->state[p], PS_SAVED);
		}
}
