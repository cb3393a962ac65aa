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
 * (pagestate.h), so whoever loses a race just returns its buffer.
 *
 * The pool (pool.c) is faulted in by the copier, off the fault path: ahead of a
 * periodic snapshot (sized from the hot set the last one had plus a reserve for cold
 * pages), while a snapshot runs when its copies need more, and it is given back once
 * snapshots stop. A fault that finds no ready buffer saves its page itself from a copy
 * on its stack: slower, still exact.
 */
#include "cow.h"
#include "../vmm/base/role.h"
#include "squeeze.h"
#include "track.h"
#include "pagestate.h"
#include "plan.h"
#include "../vmm/base/mono.h"
#include "../vmm/base/pages.h"
#include "../vmm/base/log.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FAULT_POLL_MS 100
#define COW_FAULT_RT_PRIORITY 1         /* the lowest real-time priority is enough */
/* Region copies leave this share of the ready pool to single pages: without a buffer
 * a fault must save its page to the image while the guest waits. */
#define POOL_RESERVE_DIV 8
#define POOL_MIN_RESERVE (16ULL << 20)  /* bytes kept for single pages at least */
#define POOL_GROW_STEP (32ULL << 20)    /* faulted in at once while a snapshot needs more */
#define POOL_PREPARE_MAX_S 0.5          /* a cold pool delays a snapshot's start this much */
#define POOL_KEEP_INTERVALS 3.0         /* kept for this many of the last intervals too */
#define COPIER_IDLE_MS 1000             /* how often an idle copier looks at the pool */
#define COPIER_NAP_NS 2000000L          /* its pace while topping up the reserve */
#define REGION_WAIT_NS 20000L           /* a fault waiting for another's region copy */

enum { REGION_FREE = 0, REGION_COPYING, REGION_DONE }; /* region_busy[] */

/* Lower the calling thread's priority by @n nice levels (never raise it). */
void cow_nice(int n)
{
	id_t tid = (id_t)syscall(SYS_gettid);
	int now;

	if (n <= 0)
		return;
	errno = 0;
	now = getpriority(PRIO_PROCESS, tid);
	if (errno == 0)
		setpriority(PRIO_PROCESS, tid, now + n > 19 ? 19 : now + n);
}

static size_t cow_ready_slots(struct snap_engine *e)
{
	return pool_ready_bytes(&e->pool) / e->pool.slot_size;
}

/* Fault in one more step of the pool (POOL_GROW_STEP), up to @cap slots. Returns 0,
 * -ENOSPC when the pool already holds @cap (or all it reserved), or -errno. */
static int cow_grow_step(struct snap_engine *e, size_t cap)
{
	size_t ready = cow_ready_slots(e), step = POOL_GROW_STEP / e->pool.slot_size + 1;

	if (cap > e->pool.n_slots)
		cap = e->pool.n_slots;
	if (ready >= cap)
		return -ENOSPC;
	return pool_grow(&e->pool, ready + step < cap ? ready + step : cap);
}

/* Slots of the ready pool that region copies leave free for single pages: an eighth,
 * but no more than the cold regions could ever need (none under CCoW-All). */
static size_t cow_reserve_slots(struct snap_engine *e)
{
	size_t ready = cow_ready_slots(e);
	size_t share = ready / POOL_RESERVE_DIV ? ready / POOL_RESERVE_DIV : 1;

	return share < e->cold_slots ? share : e->cold_slots;
}

/* Copy page @p alone: into a pool buffer, or, with none ready, saved right here from
 * a copy on the stack while the guest waits. */
static void cow_copy_page(struct snap_engine *e, uint64_t p)
{
	uint8_t *st = &e->state[p], tmp[PAGE_SIZE] __attribute__((aligned(64)));
	void *buf = pool_get_page(&e->pool);

	if (buf) {
		memcpy(buf, e->host + p * PAGE_SIZE, PAGE_SIZE);
		if (!ps_take(st, PS_COPYING)) {
			pool_put(&e->pool, buf); /* someone else took it meanwhile */
			return;
		}
		e->copy[p] = buf;
		e->pre[p] = 0;
		ps_set(st, PS_COPIED);
		__atomic_fetch_add(&e->cur.pages_copied, 1, __ATOMIC_RELAXED);
		return;
	}
	memcpy(tmp, e->host + p * PAGE_SIZE, PAGE_SIZE);
	if (ps_take(st, PS_CLAIMED)) {
		int rc = snap_save(e, p, tmp);

		if (rc)
			snap_fail(e, rc, "writing the image");
		ps_set(st, PS_SAVED);
	}
}

static bool cow_region_protected(const struct snap_engine *e, uint64_t first, uint64_t end)
{
	for (uint64_t p = first; p < end; p++)
		if (ps_get(&e->state[p]) == PS_PROTECTED)
			return true;
	return false;
}

/* The bytes of pages [first, end) into @slot: one memcpy on a fault path; page by page
 * for the copier, which lets a fault being served have the CPU between pages. */
static void cow_copy_bytes(struct snap_engine *e, uint8_t *slot, uint64_t first, uint64_t end,
			   bool background)
{
	if (!background) {
		memcpy(slot, e->host + first * PAGE_SIZE, (end - first) * PAGE_SIZE);
		return;
	}
	for (uint64_t p = first; p < end; p++) {
		if (__atomic_load_n(&e->faults_now, __ATOMIC_RELAXED))
			sched_yield();
		if (ps_get(&e->state[p]) == PS_PROTECTED)
			memcpy(slot + (p - first) * PAGE_SIZE, e->host + p * PAGE_SIZE, PAGE_SIZE);
	}
}

/* Take the pages of [first, end) still protected as copies in @slot; returns how
 * many. */
static uint64_t cow_take_region(struct snap_engine *e, uint8_t *slot, uint64_t first, uint64_t end)
{
	uint64_t taken = 0;

	for (uint64_t p = first; p < end; p++) {
		if (!ps_take(&e->state[p], PS_COPYING))
			continue;
		e->copy[p] = slot + (p - first) * PAGE_SIZE;
		e->pre[p] = 1;
		ps_set(&e->state[p], PS_COPIED);
		taken++;
	}
	pool_unused(&e->pool, slot, e->pool.slot_size / PAGE_SIZE - taken);
	return taken;
}

/*
 * Copy every page of region @r still protected into one slot and, unless @armed is
 * false (the pause, before protection), lift the protection of the whole region in
 * one call (a 2 MiB region stays one huge page on the host). False when nothing was
 * left to copy or the pool has no slot to spare.
 */
static bool cow_copy_region(struct snap_engine *e, uint64_t r, bool background, bool armed)
{
	uint64_t first, end, taken;
	uint8_t *slot;

	plan_region_pages(e, r, &first, &end);
	if (e->pool.slot_size < e->region_size || !cow_region_protected(e, first, end))
		return false; /* (a pool smaller than a region copies pages only) */
	slot = pool_get_slot(&e->pool, cow_reserve_slots(e));
	if (!slot)
		return false;
	cow_copy_bytes(e, slot, first, end, background);
	taken = cow_take_region(e, slot, first, end);
	if (armed) {
		track_unprotected(e, first, end - first); /* untracked from here */
		if (uffd_protect(&e->wp, first * PAGE_SIZE, (end - first) * PAGE_SIZE, false))
			return false;
	}
	__atomic_fetch_add(&e->cur.regions_precopied, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&e->cur.pages_copied, taken, __ATOMIC_RELAXED);
	__atomic_fetch_add(&e->cur.pages_precopied, taken, __ATOMIC_RELAXED);
	if (background)
		__atomic_fetch_add(&e->cur.regions_background, 1, __ATOMIC_RELAXED);
	if (e->region_size < IMG_CHUNK)
		e->split[first * PAGE_SIZE / IMG_CHUNK] = 1;
	return true;
}

bool cow_copy_eager(struct snap_engine *e, uint64_t r)
{
	size_t ready = cow_ready_slots(e);
	uint64_t first, end;

	plan_region_pages(e, r, &first, &end);
	if (!cow_region_protected(e, first, end))
		return true; /* nothing to copy: it needs no protection either */

	/* In the pause the pool may still be cold: this is what the budget is for. */
	while (pool_free_slots(&e->pool) <= cow_reserve_slots(e) && ready < e->pool.n_slots)
		if (pool_grow(&e->pool, ++ready))
			return false;
	return cow_copy_region(e, r, false, false);
}

/* A fault in hot region @r: copy the region unless another fault thread is at it
 * (then wait for it: ~0.2 ms, in naps rather than yields, which a real-time thread
 * would give only to its peers). True once the whole region is unprotected. */
static bool cow_region_fault(struct snap_engine *e, uint64_t r)
{
	struct timespec nap = { .tv_nsec = REGION_WAIT_NS };
	uint8_t *busy = &e->region_busy[r];
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
	ok = cow_copy_region(e, r, false, true);
	__atomic_store_n(busy, ok ? REGION_DONE : REGION_FREE, __ATOMIC_RELEASE);
	return ok;
}

void cow_page(struct snap_engine *e, uint64_t p, bool wake)
{
	uint64_t r = p * PAGE_SIZE / e->region_size;
	uint8_t *st = &e->state[p];

	if (wake && e->policy == SNAP_CCOW && e->hot[r] && ps_get(st) == PS_PROTECTED &&
	    cow_region_fault(e, r))
		return;
	if (ps_get(st) == PS_PROTECTED) {
		e->faulted[p] = 1;
		cow_copy_page(e, p);
	}
	if (wake) {
		track_fault(e, p);
		uffd_protect(&e->wp, p * PAGE_SIZE, PAGE_SIZE, false);
		e->split[p / (IMG_CHUNK / PAGE_SIZE)] = 1;
	}
}

/* Count a fault in; keep the most served at once. */
static void cow_fault_in(struct snap_engine *e)
{
	uint64_t n = (uint64_t)__atomic_add_fetch(&e->faults_now, 1, __ATOMIC_ACQ_REL), m;

	__atomic_fetch_add(&e->cur.cow_faults, 1, __ATOMIC_RELAXED);
	m = __atomic_load_n(&e->cur.faults_parallel_max, __ATOMIC_RELAXED);
	while (n > m && !__atomic_compare_exchange_n(&e->cur.faults_parallel_max, &m, n, false,
						     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	m = __atomic_load_n(&e->faults_most, __ATOMIC_RELAXED);
	while (n > m && !__atomic_compare_exchange_n(&e->faults_most, &m, n, false,
						     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* A fault thread preempts the vCPUs, the copier and the writer at once where the
 * process may use real-time scheduling (root, CAP_SYS_NICE); its work is bounded
 * (one region copy), and the kernel's real-time throttling bounds the rest. */
static void cow_fault_priority(const struct snap_engine *e)
{
	struct sched_param sp = { .sched_priority = COW_FAULT_RT_PRIORITY };

	if (e->tune.fault_rt)
		(void)pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
}

static void *cow_fault_thread(void *arg)
{
	struct snap_engine *e = arg;
	uint64_t gpa;

	role_enter(ROLE_SNAPSHOT);
	cow_fault_priority(e);

	while (!__atomic_load_n(&e->fault_stop, __ATOMIC_ACQUIRE)) {
		int rc = uffd_next_fault(&e->wp, FAULT_POLL_MS, &gpa);

		if (rc < 0) {
			log_err("userfaultfd: %s", strerror(-rc));
			break;
		}
		if (rc == 0 || gpa >= e->size)
			continue;
		cow_fault_in(e);
		cow_page(e, gpa / PAGE_SIZE, true);
		__atomic_sub_fetch(&e->faults_now, 1, __ATOMIC_ACQ_REL);
	}
	return NULL;
}

static bool cow_copy_on(struct snap_engine *e)
{
	return __atomic_load_n(&e->copy_wanted, __ATOMIC_ACQUIRE);
}

/* A free slot beyond the reserve, growing the pool (first touches: the copier's
 * time, not the guest's) when there is none. */
static bool cow_slot_room(struct snap_engine *e)
{
	if (pool_free_slots(&e->pool) > cow_reserve_slots(e))
		return true;
	return cow_grow_step(e, e->pool.n_slots) == 0 &&
	       pool_free_slots(&e->pool) > cow_reserve_slots(e);
}

/* The hot regions the guest has not reached, in the writer's order (the writer is
 * behind: it waits for the disk). */
static void cow_copy_hot(struct snap_engine *e)
{
	for (uint64_t i = 0; i < e->size / IMG_CHUNK && cow_copy_on(e); i++) {
		uint64_t r0, r1;

		plan_chunk_regions(e, e->order[i], &r0, &r1);
		for (uint64_t r = r0; r <= r1 && cow_copy_on(e); r++) {
			uint8_t expect = REGION_FREE;

			if (!e->hot[r] || __atomic_load_n(&e->region_busy[r], __ATOMIC_ACQUIRE))
				continue;
			if (!cow_slot_room(e))
				return;
			if (cow_copy_region(e, r, true, true))
				__atomic_compare_exchange_n(&e->region_busy[r], &expect, REGION_DONE,
							    false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
		}
	}
}

/* Until the writer is done: keep enough ready buffers for single-page copies. */
static void cow_keep_reserve(struct snap_engine *e)
{
	struct timespec nap = { .tv_nsec = COPIER_NAP_NS };

	while (cow_copy_on(e)) {
		bool low = pool_free_pages(&e->pool) * PAGE_SIZE < POOL_MIN_RESERVE;

		/* Nap when nothing is needed, or nothing more can be had. */
		if (!low || cow_grow_step(e, e->pool.n_slots))
			nanosleep(&nap, NULL);
	}
}

/* Between snapshots: ready for the next periodic one, or given back once they stopped. */
static void cow_pool_idle(struct snap_engine *e)
{
	double keep = POOL_KEEP_INTERVALS * e->interval_s, since;

	if (!e->last_start_s)
		return;
	since = mono_s() - e->last_start_s;
	if (since > (keep > e->tune.pool_keep_s ? keep : e->tune.pool_keep_s))
		pool_shrink(&e->pool, 0);
	else if (pool_ready_bytes(&e->pool) < e->pool_target * e->pool.slot_size)
		pool_grow(&e->pool, e->pool_target);
}

static void *cow_copier_thread(void *arg)
{
	struct snap_engine *e = arg;

	role_enter(ROLE_SNAPSHOT);
	cow_nice(e->tune.copier_nice);
	pthread_mutex_lock(&e->copier_lock);
	while (!e->copier_stop) {
		if (e->copy_wanted) {
			e->copier_busy = true;
			pthread_mutex_unlock(&e->copier_lock);
			cow_copy_hot(e);
			cow_keep_reserve(e);
			pthread_mutex_lock(&e->copier_lock);
			e->copier_busy = false;
			pthread_cond_broadcast(&e->copier_cv);
			pthread_mutex_unlock(&e->copier_lock);
			/* Ready for the next one now: a periodic snapshot may come soon. */
			pool_grow(&e->pool, e->pool_target);
			pthread_mutex_lock(&e->copier_lock);
			continue;
		}
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += COPIER_IDLE_MS / 1000;
		/* Only on the timeout: the squeezer's and the writer's broadcasts on this
		 * condition come while a snapshot ends, not a second after it. */
		if (pthread_cond_timedwait(&e->copier_cv, &e->copier_lock, &until) != ETIMEDOUT ||
		    e->copy_wanted || e->copier_stop)
			continue;
		pthread_mutex_unlock(&e->copier_lock);
		cow_pool_idle(e);
		pthread_mutex_lock(&e->copier_lock);
	}
	pthread_mutex_unlock(&e->copier_lock);
	return NULL;
}

/* Slots the next snapshot needs: its hot regions, and room for single pages (what the
 * last one copied page by page, and a quarter more). */
static size_t cow_pool_need(struct snap_engine *e, uint64_t hot)
{
	uint64_t single = e->single_bytes + e->single_bytes / 4, need;

	if (single < POOL_MIN_RESERVE)
		single = POOL_MIN_RESERVE;
	need = hot + (single + e->pool.slot_size - 1) / e->pool.slot_size;
	return need < e->pool.n_slots ? (size_t)need : e->pool.n_slots;
}

void cow_pool_prepare(struct snap_engine *e, const struct snap_request *req)
{
	double now = mono_s(), until = now + POOL_PREPARE_MAX_S;
	size_t want;

	/* First, so that an idle copier does not give the pool back meanwhile. */
	if (e->last_start_s)
		e->interval_s = now - e->last_start_s;
	e->last_start_s = now;
	plan_snapshot(e, req); /* its hot count now; planned again in the pause */
	want = cow_pool_need(e, e->cur.regions_hot);
	while (mono_s() < until) /* step by step: the budget is checked between steps */
		if (cow_grow_step(e, want))
			break;
}

void cow_pool_plan(struct snap_engine *e)
{
	uint64_t cold = e->n_regions - e->cur.regions_hot;

	e->cold_slots = (size_t)((cold * e->region_size + e->pool.slot_size - 1) / e->pool.slot_size);
	pool_reset(&e->pool);
	squeeze_plan(e);
	memset(e->region_busy, REGION_FREE, e->n_regions);
	e->pool_target = cow_pool_need(e, e->cur.regions_hot);
}

void cow_copy_begin(struct snap_engine *e)
{
	pthread_mutex_lock(&e->copier_lock);
	e->copy_wanted = true;
	pthread_cond_broadcast(&e->copier_cv);
	pthread_mutex_unlock(&e->copier_lock);
}

void cow_copy_end(struct snap_engine *e)
{
	/* What the next snapshot will need, for the copier to get ready at once. */
	e->single_bytes = (e->cur.pages_copied - e->cur.pages_precopied) * PAGE_SIZE;
	e->pool_target = cow_pool_need(e, e->cur.regions_hot);
	pthread_mutex_lock(&e->copier_lock);
	e->copy_wanted = false;
	while (e->copier_busy || e->squeezer_busy)
		pthread_cond_wait(&e->copier_cv, &e->copier_lock);
	pthread_mutex_unlock(&e->copier_lock);
	while (__atomic_load_n(&e->faults_now, __ATOMIC_ACQUIRE))
		sched_yield();
	for (uint64_t p = 0; p < e->size / PAGE_SIZE; p++) /* a save from a stack copy */
		while (ps_get(&e->state[p]) == PS_CLAIMED)
			sched_yield();
}

int cow_threads_start(struct snap_engine *e)
{
	int rc;

	if (e->wp.fd >= 0)
		return 0;
	rc = uffd_open(&e->wp, e->host, e->size, UFFD_MODE_WP);
	if (rc)
		return rc;
	for (; e->n_faulters < e->tune.fault_threads; e->n_faulters++)
		if (pthread_create(&e->faulter[e->n_faulters], NULL, cow_fault_thread, e))
			break;
	if (!e->n_faulters)
		return -EAGAIN;
	if (!pthread_create(&e->copier, NULL, cow_copier_thread, e))
		e->copier_live = true;
	if (squeeze_thread_start(e))
		log_warn("no thread to compress held copies: a full pool falls back to traps");
	return 0;
}

void cow_threads_stop(struct snap_engine *e)
{
	if (e->wp.fd < 0)
		return;
	__atomic_store_n(&e->fault_stop, true, __ATOMIC_RELEASE);
	for (int i = 0; i < e->n_faulters; i++)
		pthread_join(e->faulter[i], NULL);
	e->n_faulters = 0;
	if (e->copier_live) {
		pthread_mutex_lock(&e->copier_lock);
		e->copier_stop = true;
		pthread_cond_broadcast(&e->copier_cv);
		pthread_mutex_unlock(&e->copier_lock);
		pthread_join(e->copier, NULL);
		e->copier_live = false;
	}
	squeeze_thread_stop(e);
	uffd_close(&e->wp);
}
