/*
 * tracker.c - the coverage tracker and its window policy.
 *
 * The dirty log is reached through struct tracker_log_ops; for a VM that is KVM's
 * (vmm/kvm/kvm_vm.c), described here because its costs shape the policy. Dirty
 * logging runs with manual protect and every page initially marked dirty, and is
 * switched on only for a measuring window: logging starts with none protected, and
 * clearing the log then protects the pages resident at that moment (a write to any
 * other page is the guest filling fresh memory, which no snapshot copies). When the
 * window closes the log is read, folded into per-region coverage (coverage.c), and
 * logging is turned off again for DIRTY_GAP times the time the window cost the guest,
 * so that windows cost the guest under 2%. The first window opens DIRTY_FIRST_S after the
 * start; a window in which the guest mostly filled memory does not count (start-up)
 * and is tried again soon.
 *
 * A window is meant to show what the guest writes in the time it runs during a
 * snapshot (the last snapshot's duration). While logging, every first touch of a page
 * is a fault the guest waits for (~30 us on our nested hosts, against well under a
 * microsecond for the write itself; measured: watching only every 64th page did not
 * make the guest faster), so a guest that writes much memory gets 2-5% of its work done
 * in a window, and the wall clock says little about how long it ran. A window is timed
 * by the guest's progress instead: how often it read the clock through the vDSO
 * (struct tracker_progress), over the rate it did so with no window open (tracker_gap).
 * A guest that reads the clock too seldom is timed by its faults (wall time less a
 * fault per page written, floored). A window stays open until the guest has run the
 * planned time, or lost DIRTY_LOST_CAP of it to faults, or a snapshot starts.
 *
 * Each finished snapshot adds its own observation (snapshot/engine.c): which pages the
 * guest wrote while the snapshot watched them, timed the same way. With a guest that
 * runs most of a snapshot (its hot regions copied, not trapping) that is tens of times
 * more than a window sees, and it comes free.
 *
 * Why not leave logging on: while logging, KVM maps guest memory with 4 KiB pages, and
 * a snapshot's write protection then zaps and re-faults hundreds of thousands of small
 * mappings instead of a few hundred huge ones (measured: the guest ran 20x slower
 * under periodic snapshots). So a snapshot first closes the open window (tracker_hold),
 * and no window opens while it runs. Works alongside userfaultfd write protection on
 * the same memory.
 */
#include "tracker.h"
#include "../vmm/base/role.h"
#include "../vmm/base/mono.h"
#include "../vmm/base/pages.h"
#include "resident.h"

#include "../vmm/base/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DIRTY_GAP         64.0  /* idle after a window, in the guest's time lost to it */
#define DIRTY_RETRY       4.0   /* the same, after a window that did not count */
#define DIRTY_FIRST_S     1.0   /* no window before: start-up is not what a guest writes later */
#define DIRTY_WINDOW_MIN  0.25
#define DIRTY_WINDOW_MAX  10.0
#define DIRTY_WINDOW_DEF  1.0
#define DIRTY_LOST_CAP    0.5   /* a window closes once the guest lost this share of a plan, */
#define DIRTY_LOST_MIN    0.25  /* or this many seconds if more: shorter says too little */
#define DIRTY_MIN_SHARE   0.01  /* a guest that ran less of the plan says too little */
#define DIRTY_RAN_FLOOR   0.02  /* the least share of a window taken as the guest's run */
#define DIRTY_STEP_S      0.05  /* how often an open window reads the log */
#define DIRTY_FAULT_MIN   5e-6  /* bounds of the cost of a dirty-logging fault, s */
#define DIRTY_FAULT_MAX   100e-6
#define DIRTY_FAULT_BATCH 256   /* new dirty pages in a step to time a fault by */
#define DIRTY_RATE_S      0.2   /* the guest's normal progress is timed in steps this long... */
#define DIRTY_RATE_MIN    100.0 /* ...and serves when it grows at least this fast, per s */
#define DIRTY_OBS_MIN_S   0.05  /* a snapshot counts if the guest ran this long during it */

/* Pages marked in the dirty bitmap. */
static uint64_t tracker_count(const struct tracker *t)
{
	return coverage_count_bits(t->bitmap, 0, t->ram_size / PAGE_SIZE);
}

static void tracker_set_run(void *ctx, uint64_t first, uint64_t n)
{
	uint64_t *bits = ctx;

	for (uint64_t p = first; p < first + n; p++)
		bits[p / 64] |= 1ULL << (p % 64);
}

/* Which pages of RAM hold data now (host-resident): a write to any other page is the
 * guest filling fresh memory, which no snapshot has to copy. */
static int tracker_mark_present(struct tracker *t)
{
	memset(t->present, 0, t->ram_size / PAGE_SIZE / 8);
	return resident_scan(t->host, t->ram_size, tracker_set_run, t->present);
}

struct tracker_filled {
	const uint64_t *present;
	uint64_t n;
};

static void tracker_count_run(void *ctx, uint64_t first, uint64_t n)
{
	struct tracker_filled *f = ctx;

	f->n += n - coverage_count_bits(f->present, first, n);
}

/* Pages resident now and not at the window's start: memory the guest filled. */
static uint64_t tracker_count_filled(struct tracker *t)
{
	struct tracker_filled f = { .present = t->present };

	if (resident_scan(t->host, t->ram_size, tracker_count_run, &f))
		return 0;
	return f.n;
}

/* Keep only the watched (resident) pages in the bitmap: the others read as dirty
 * throughout. Returns how many were written. */
static uint64_t tracker_count_watched(struct tracker *t)
{
	for (uint64_t i = 0; i < t->ram_size / PAGE_SIZE / 64; i++)
		t->bitmap[i] &= t->present[i];
	return tracker_count(t);
}

/* Dirty logging on or off. */
static int tracker_logging(struct tracker *t, bool on)
{
	uint64_t t0 = mono_ns();
	int rc = t->log.ops->logging(t->log.ctx, on);

	t->harvest_ns += mono_ns() - t0;
	return rc;
}

/* Start watching the resident pages: clear their dirty bits, which write-protects
 * them (logging started with every page marked dirty and none protected). */
static int tracker_watch(struct tracker *t)
{
	uint64_t t0 = mono_ns();
	int rc = t->log.ops->watch(t->log.ctx, t->present);

	t->harvest_ns += mono_ns() - t0;
	return rc;
}

static int tracker_get(struct tracker *t)
{
	uint64_t t0 = mono_ns();
	int rc = t->log.ops->get(t->log.ctx, t->bitmap);

	t->harvest_ns += mono_ns() - t0;
	return rc;
}

void tracker_hold(struct tracker *t, bool hold)
{
	pthread_mutex_lock(&t->w.lock);
	/* Counted: a snapshot may start while the last one's writer still tidies up. */
	if (hold)
		t->held++;
	else if (t->held > 0)
		t->held--;
	pthread_cond_broadcast(&t->w.cond);
	/* An open window is closed first: protecting memory for a snapshot while KVM maps
	 * it with small pages would cost a fault per page afterwards. */
	while (hold && t->logging)
		pthread_cond_wait(&t->w.cond, &t->w.lock);
	pthread_mutex_unlock(&t->w.lock);
}

/* Sleep @s seconds unless told to stop, or (@wake_on_hold) a snapshot is coming;
 * returns true when stopping. */
static bool tracker_sleep(struct tracker *t, double s, bool wake_on_hold)
{
	struct timespec until;
	bool stop;

	worker_deadline(s, &until);
	pthread_mutex_lock(&t->w.lock);
	while (!t->w.stop && !(wake_on_hold && t->held) && worker_wait_until(&t->w, &until) == 0)
		;
	stop = t->w.stop;
	pthread_mutex_unlock(&t->w.lock);
	return stop;
}

static bool tracker_held(struct tracker *t)
{
	bool held;

	pthread_mutex_lock(&t->w.lock);
	held = t->held;
	pthread_mutex_unlock(&t->w.lock);
	return held;
}

/* Wait while a snapshot runs; true when stopping. */
static bool tracker_wait_unheld(struct tracker *t)
{
	bool stop;

	pthread_mutex_lock(&t->w.lock);
	while (t->held && !t->w.stop)
		pthread_cond_wait(&t->w.cond, &t->w.lock);
	stop = t->w.stop;
	pthread_mutex_unlock(&t->w.lock);
	return stop;
}

uint64_t tracker_progress_now(const struct tracker *t)
{
	return t->progress.read ? t->progress.read(t->progress.ctx) : 0;
}

/* Progress since count @c0; the guest writes the count, so it may go back: none then. */
static uint64_t tracker_progress_since(const struct tracker *t, uint64_t c0)
{
	uint64_t c = tracker_progress_now(t);

	return c > c0 ? c - c0 : 0;
}

/* Without a progress count: how long the guest ran in @wall seconds in which it
 * dirtied @d pages, each a fault of @fault seconds. In a window where the guest did
 * little else than fault, this is a small difference of two large numbers, and a
 * fault's cost is known to a few per cent only: it is never taken below
 * DIRTY_RAN_FLOOR of the wall time (zipfbench's own reports showed it doing 2.5% of
 * its normal work during such a window). */
static double tracker_ran_by_faults(double wall, uint64_t d, double fault)
{
	double ran = wall - (double)d * fault;

	return ran > wall * DIRTY_RAN_FLOOR ? ran : wall * DIRTY_RAN_FLOOR;
}

/* How long the guest ran in the @wall seconds since a window opened, in which it
 * dirtied @d watched pages: by its progress count when it has one (progress since
 * @c0 over the rate it had before the window), else by the faults. */
static double tracker_ran(const struct tracker *t, double wall, uint64_t d, uint64_t c0)
{
	double ran;

	if (t->progress_rate <= 0)
		return tracker_ran_by_faults(wall, d, t->fault_s);
	ran = (double)tracker_progress_since(t, c0) / t->progress_rate;
	return ran > wall ? wall : ran;
}

static void tracker_acc_reset(struct tracker *t)
{
	t->acc_ran = t->acc_wall = 0;
	memset(t->acc, 0, t->ram_size / PAGE_SIZE / 8);
	memset(t->acc_present, 0, t->ram_size / PAGE_SIZE / 8);
}

/* Add a closed window to the one being assembled: windows that snapshots cut short
 * (back-to-back snapshots leave a guest little time between them) add up until the
 * guest has run enough. A window in which the guest mostly filled fresh memory
 * (@rewrites false: start-up) says nothing about rewrites and restarts the assembly.
 * True when the assembled window is ready to count. */
static bool tracker_accumulate(struct tracker *t, bool rewrites, double ran, double wall,
			     double plan)
{
	if (!rewrites) {
		tracker_acc_reset(t);
		return false;
	}
	for (uint64_t i = 0; i < t->ram_size / PAGE_SIZE / 64; i++) {
		t->acc[i] |= t->bitmap[i];
		t->acc_present[i] |= t->present[i];
	}
	t->acc_ran += ran;
	t->acc_wall += wall;
	return t->acc_ran >= plan * DIRTY_MIN_SHARE;
}

/*
 * One measuring window: logging on, the resident pages watched, until the guest has
 * run the planned time, or lost DIRTY_LOST_CAP of it to faults (DIRTY_LOST_MIN at
 * least), or a snapshot is coming. The log is read every step; how long the guest ran comes from tracker_ran. A
 * fault's cost is the shortest time per newly dirty page seen in a step of any window
 * so far (then the guest did nothing but fault), within DIRTY_FAULT_MIN..MAX. What
 * the window saw is folded in with the time the guest ran (coverage.c). Stores its
 * wall length in @wall, the time the guest lost to faults in @lost, and in @counted
 * whether the window went into the coverage.
 */
static int tracker_window(struct tracker *t, double *wall, double *lost, bool *counted)
{
	double plan, lost_cap, ran = 0, w0 = mono_s(), t_prev = w0;
	uint64_t d = 0, d_prev = 0, watched = 0, filled, c0 = tracker_progress_now(t);
	bool open;
	int rc;

	pthread_mutex_lock(&t->w.lock);
	plan = t->window_s;
	open = t->logging = !t->held;
	pthread_mutex_unlock(&t->w.lock);
	lost_cap = plan * DIRTY_LOST_CAP > DIRTY_LOST_MIN ? plan * DIRTY_LOST_CAP : DIRTY_LOST_MIN;
	*wall = *lost = 0;
	*counted = false;
	if (!open)
		return 0;
	rc = tracker_mark_present(t);
	if (!rc)
		watched = coverage_count_bits(t->present, 0, t->ram_size / PAGE_SIZE);
	if (!rc)
		rc = tracker_logging(t, true);
	if (!rc)
		rc = tracker_watch(t);
	while (!rc && ran < plan && mono_s() - w0 - ran < lost_cap &&
	       !tracker_sleep(t, DIRTY_STEP_S, true) && !tracker_held(t)) {
		double now;

		rc = tracker_get(t);
		now = mono_s();
		d = tracker_count_watched(t);
		if (d >= d_prev + DIRTY_FAULT_BATCH) {
			double per = (now - t_prev) / (double)(d - d_prev);

			if (per < t->fault_s)
				t->fault_s = per < DIRTY_FAULT_MIN ? DIRTY_FAULT_MIN : per;
		}
		d_prev = d;
		t_prev = now;
		ran = tracker_ran(t, now - w0, d, c0);
	}
	if (!rc)
		rc = tracker_get(t);
	if (tracker_logging(t, false) && !rc)
		rc = -EIO;
	*wall = mono_s() - w0;
	if (!rc) {
		d = tracker_count_watched(t);
		ran = tracker_ran(t, *wall, d, c0);
	}
	*lost = *wall - ran;
	/* Start-up: the guest filled more memory than it rewrote. */
	filled = rc ? 0 : tracker_count_filled(t);
	pthread_mutex_lock(&t->w.lock);
	*counted = !rc && watched &&
		   tracker_accumulate(t, filled <= d, ran, *wall, plan);
	log_debug("coverage window: %.3f s open, guest ran %.3f s of %.3f (%s %.0f/s): %llu of %llu "
		  "resident pages written, %llu filled, fault %.1f us: %s", *wall, ran, plan,
		  t->progress_rate > 0 ? "by progress" : "by faults", t->progress_rate,
		  (unsigned long long)d, (unsigned long long)watched, (unsigned long long)filled,
		  t->fault_s * 1e6, *counted ? "counted" : "not yet counted");
	if (*counted) {
		coverage_add_window(&t->cov, t->acc, t->acc_present, t->acc_ran);
		heat_fold(&t->heat, t->acc, t->acc_present);
		t->harvests++;
		t->last_ran_s = t->acc_ran;
		t->last_wall_s = t->acc_wall;
		t->last_fault_us = t->fault_s * 1e6;
		tracker_acc_reset(t);
	}
	t->lost_s += *lost;
	t->logging = false;
	pthread_cond_broadcast(&t->w.cond);
	pthread_mutex_unlock(&t->w.lock);
	return rc;
}

/*
 * Wait @gap seconds before the next window, timing the guest's progress meanwhile in
 * steps of DIRTY_RATE_S. Its normal rate is that of the fastest step in which no
 * snapshot ran and which follows one at least half as fast: the guest runs slower
 * during and just after a snapshot or a window, or while it starts up, and a rate taken
 * then would make the guest seem to have run longer than it did. A gap with no such
 * step keeps the rate known before. True when stopping.
 */
static bool tracker_gap(struct tracker *t, double gap)
{
	double end = mono_s() + gap, best = 0, prev = -1;
	bool timed = false;

	for (double now = mono_s(); now < end; now = mono_s()) {
		double step = end - now < DIRTY_RATE_S ? end - now : DIRTY_RATE_S, rate;
		uint64_t c0 = tracker_progress_now(t);

		if (tracker_sleep(t, step > DIRTY_STEP_S ? step : DIRTY_STEP_S, true))
			return true;
		if (tracker_held(t)) {
			prev = -1;
			if (tracker_wait_unheld(t))
				return true;
			continue;
		}
		step = mono_s() - now;
		if (step < DIRTY_RATE_S / 2) {
			prev = -1;
			continue;
		}
		rate = (double)tracker_progress_since(t, c0) / step;
		if (prev >= 0 && prev >= rate / 2) {
			best = rate > best ? rate : best;
			timed = true;
		}
		prev = rate;
	}
	if (timed) {
		pthread_mutex_lock(&t->w.lock);
		t->progress_rate = best >= DIRTY_RATE_MIN ? best : 0;
		pthread_mutex_unlock(&t->w.lock);
	}
	return false;
}

/* Without a dirty log there are no windows: only the guest's progress rate is timed,
 * which snapshots' own observations need. */
#define DIRTY_NOLOG_GAP_S 1.0

static void *tracker_thread(void *arg)
{
	struct tracker *t = arg;
	double wall = 0;
	int rc = 0;

	role_enter(ROLE_HELPER);
	if (tracker_gap(t, DIRTY_FIRST_S))
		goto out;
	while (!t->log.ops && !tracker_wait_unheld(t))
		if (tracker_gap(t, DIRTY_NOLOG_GAP_S))
			goto out;
	while (t->log.ops && !tracker_wait_unheld(t)) {
		double lost, gap;
		bool counted = false;

		rc = tracker_window(t, &wall, &lost, &counted);
		/* The gap keeps the guest's loss to windows near 1 / DIRTY_GAP (~1.5%). A window
		 * that did not count (cut short by a snapshot, or start-up filling memory) is
		 * tried again sooner: such windows cost the guest up to 1 / DIRTY_RETRY. */
		gap = lost * (counted ? DIRTY_GAP : DIRTY_RETRY);
		if (rc || tracker_gap(t, gap))
			break;
	}
	if (rc)
		log_warn("coverage tracker stopped: %s", strerror(-rc));
out:
	pthread_mutex_lock(&t->w.lock);
	t->logging = false;
	pthread_cond_broadcast(&t->w.cond);
	pthread_mutex_unlock(&t->w.lock);
	return NULL;
}
/* Everything but the log: buffers, coverage, the thread. @t->log is set. */
static int tracker_start(struct tracker *t, uint8_t *host, uint64_t ram_size,
		       uint64_t region_size, unsigned window_ms, struct tracker_progress progress)
{
	int rc;

	t->host = host;
	t->ram_size = ram_size;
	t->adaptive = window_ms == 0;
	t->progress = progress;
	t->window_s = window_ms ? window_ms / 1000.0 : DIRTY_WINDOW_DEF;
	worker_init(&t->w);
	rc = coverage_init(&t->cov, ram_size, region_size);
	if (!rc)
		rc = heat_init(&t->heat, ram_size / PAGE_SIZE);
	if (rc)
		return rc;
	t->bitmap = calloc(ram_size / PAGE_SIZE / 64, sizeof(uint64_t));
	t->present = calloc(ram_size / PAGE_SIZE / 64, sizeof(uint64_t));
	t->acc = calloc(ram_size / PAGE_SIZE / 64, sizeof(uint64_t));
	t->acc_present = calloc(ram_size / PAGE_SIZE / 64, sizeof(uint64_t));
	t->hot = calloc(t->cov.n_regions, 1);
	t->fault_s = DIRTY_FAULT_MAX;
	if (!t->bitmap || !t->present || !t->acc || !t->acc_present || !t->hot)
		return -ENOMEM;
	return worker_start(&t->w, tracker_thread, t);
}

int tracker_init(struct tracker *t, const struct tracker_log *log, uint8_t *host,
		   uint64_t ram_size, uint64_t region_size, unsigned window_ms,
		   struct tracker_progress progress)
{
	memset(t, 0, sizeof(*t));
	if (log)
		t->log = *log;
	return tracker_start(t, host, ram_size, region_size, window_ms, progress);
}

void tracker_fini(struct tracker *t)
{
	worker_stop(&t->w);
	coverage_fini(&t->cov);
	heat_fini(&t->heat);
	free(t->bitmap);
	free(t->present);
	free(t->acc);
	free(t->acc_present);
	free(t->hot);
	t->hot = NULL;
	t->bitmap = t->present = t->acc = t->acc_present = NULL;
}

uint64_t tracker_region_coverage(struct tracker *t, double seconds, double *out, uint64_t n)
{
	uint64_t r;

	pthread_mutex_lock(&t->w.lock);
	if (n > t->cov.n_regions)
		n = t->cov.n_regions;
	for (r = 0; r < n; r++)
		out[r] = coverage_known(&t->cov) ? coverage_of(&t->cov, r, seconds) : 0;
	pthread_mutex_unlock(&t->w.lock);
	return n;
}

uint64_t tracker_classify(struct tracker *t, double threshold, uint8_t *hot)
{
	uint64_t n;

	pthread_mutex_lock(&t->w.lock);
	/* Before any window is measured nothing is known: all cold, unless the threshold
	 * says every region is hot anyway. */
	if (coverage_known(&t->cov) || threshold <= 0) {
		/* Hysteresis holds at one threshold: a request with another starts afresh. */
		if (threshold != t->hot_threshold)
			memset(t->hot, 0, t->cov.n_regions);
		t->hot_threshold = threshold;
		n = coverage_classify(&t->cov, threshold, t->window_s, t->hot);
		memcpy(hot, t->hot, t->cov.n_regions);
	} else {
		n = 0;
		memset(hot, 0, t->cov.n_regions);
	}
	pthread_mutex_unlock(&t->w.lock);
	return n;
}

void tracker_snapshot_observed(struct tracker *t, const struct cov_obs *obs, uint64_t progress)
{
	pthread_mutex_lock(&t->w.lock);
	/* The count grows in steps (zipfbench reads the clock every 4096 updates): a
	 * snapshot in which the guest hardly ran cannot be timed by it. */
	if (t->progress_rate <= 0 || (double)progress < t->progress_rate * DIRTY_OBS_MIN_S) {
		log_debug("coverage: a snapshot's observations left out: progress %llu, rate %.0f "
			  "per s (%s)", (unsigned long long)progress, t->progress_rate,
			  t->progress_rate <= 0 ? "not timed yet" : "the guest hardly ran");
		pthread_mutex_unlock(&t->w.lock);
		return;
	}
	coverage_add_snapshot(&t->cov, obs, t->progress_rate);
	if (log_get_level() >= LOG_DEBUG) {
		uint64_t w = 0, n = 0;
		double x = 0;

		for (uint64_t r = 0; r < t->cov.n_regions; r++)
			w += obs[r].written, n += obs[r].pages, x += obs[r].exposure;
		log_debug("coverage: a snapshot saw %llu of %llu pages written, watched %.3f s each "
			  "on average (progress %.0f per s)", (unsigned long long)w,
			  (unsigned long long)n, n && t->progress_rate > 0 ? x / n / t->progress_rate : 0,
			  t->progress_rate);
	}
	pthread_mutex_unlock(&t->w.lock);
}

void tracker_pages_observed(struct tracker *t, const uint64_t *written, const uint64_t *watched)
{
	pthread_mutex_lock(&t->w.lock);
	heat_fold(&t->heat, written, watched);
	pthread_mutex_unlock(&t->w.lock);
}

uint64_t tracker_hot_pages(struct tracker *t, uint32_t *out, uint64_t max)
{
	uint64_t n;

	pthread_mutex_lock(&t->w.lock);
	n = heat_rank(&t->heat, HEAT_MIN, out, max);
	pthread_mutex_unlock(&t->w.lock);
	return n;
}

void tracker_snapshot_took(struct tracker *t, double seconds)
{
	if (!t->adaptive)
		return;
	if (seconds < DIRTY_WINDOW_MIN)
		seconds = DIRTY_WINDOW_MIN;
	if (seconds > DIRTY_WINDOW_MAX)
		seconds = DIRTY_WINDOW_MAX;
	pthread_mutex_lock(&t->w.lock);
	t->window_s = seconds;
	pthread_mutex_unlock(&t->w.lock);
}
