/*
 * tracker.c - the coverage tracker and its window policy, within a budget.
 *
 * The dirty log is reached through struct tracker_log_ops; for a VM that is KVM's
 * (vmm/kvm/kvm_vm.c), described here because its costs shape the policy. Dirty
 * logging runs with manual protect and every page initially marked dirty: turning it
 * on protects nothing, and clearing a page's bit (watching it) write-protects that
 * page alone. The guest's first write to a watched page is then a fault it waits for:
 * ~30 us on our AMD hosts, ~100 us on others, against well under a microsecond for the
 * write itself. Counted at DIRTY_FAULT_S, the dearer figure.
 *
 * The old tracker watched every resident page for a window and let the guest lose up
 * to a quarter of a second in it: Redis' single event loop felt that as one stall of
 * hundreds of milliseconds, with no snapshot running. So now every window watches a
 * sample, and the sample's size is what bounds the cost, by construction:
 *
 *  - A page faults at most once per window, so a window of n pages costs at most
 *    n * DIRTY_FAULT_S, whoever takes the faults and whenever. n is at most
 *    --coverage-stall-ms / DIRTY_FAULT_S (20 pages at 2 ms), and windows are at least
 *    TRACKER_STALL_SPAN_S apart, so no 10 ms of any vCPU's run loses more.
 *  - Before a window opens, the faults of the windows that ended within the last second
 *    plus its n stay within --coverage-budget of a second (100 faults at 1%), so no
 *    second does either.
 *  - A window samples one region, the next in turn, its pages at random among the
 *    resident ones (watching a page splits KVM's huge mapping of its region: see
 *    tracker_pick). A sampled page tells whether it was written while watched; a
 *    region's samples add up over windows, with how long each was watched, and fold
 *    into its coverage (coverage_add_samples) once there are DIRTY_FOLD_SAMPLES.
 *
 * A window lasts what it stands for: the last snapshot's duration from its request,
 * pre-copy rounds included (adaptive), or --coverage-window. With a budget this small
 * the guest runs at its normal speed while watched, so the window is timed by the
 * clock, and the guest's progress rate (which times snapshots' own observations) is
 * taken from the windows too.
 *
 * Each finished snapshot adds its own observation (snapshot/engine.c): which pages the
 * guest wrote while the snapshot watched them, timed by the guest's progress. That is
 * every page of every region, and it comes free; the windows matter before the first
 * snapshot and between rare ones.
 *
 * Why not leave logging on: while logging, KVM maps guest memory with 4 KiB pages, and
 * a snapshot's write protection then zaps and re-faults hundreds of thousands of small
 * mappings instead of a few hundred huge ones (measured: the guest ran 20x slower
 * under periodic snapshots). So a snapshot first closes the open window (tracker_hold),
 * and no window opens while it runs. Works alongside userfaultfd write protection on
 * the same memory.
 */
#include "tracker_impl.h"
#include "../base/role.h"
#include "../base/mono.h"
#include "../base/pages.h"

#include "../base/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DIRTY_FIRST_S       1.0  /* no window before: start-up is not what a guest writes later */
#define DIRTY_SAMPLE_MIN_S  0.05 /* the shortest window (--coverage-window may ask less) */
#define DIRTY_FOLD_SAMPLES  6    /* a region's samples fold once there are this many */
#define DIRTY_POLL_S        0.02 /* how often an open window reads the log */
#define DIRTY_SETTLED_BELOW 0.3  /* a region this far below the hot threshold, */
#define DIRTY_SETTLED_ABOVE 0.1  /* or this far above, is settled: */
#define DIRTY_SETTLED_EVERY 4    /* sampled one visit in this many */
#define DIRTY_BUDGET_WAIT_S 0.1  /* how long to wait when the budget allows no window */
#define DIRTY_NOLOG_GAP_S   1.0  /* without windows: how often the progress rate is timed */
#define DIRTY_OBS_MIN_S     0.005 /* a snapshot counts if the guest ran this long during it */
#define DIRTY_OBS_MIN_STEPS 20    /* and its progress count moved this many steps */
#define DIRTY_AUDIT_FIRST_S 15.0 /* --coverage-audit: the first full window after start... */
#define DIRTY_AUDIT_EVERY_S 30.0 /* ...and the next ones this much later */
#define DIRTY_AUDIT_RETRY_S 1.0  /* after one a snapshot cut short */
#define DIRTY_RECENT        (sizeof(((struct tracker *)0)->recent) / sizeof(((struct tracker *)0)->recent[0]))
#define DIRTY_RATES         (sizeof(((struct tracker *)0)->rates) / sizeof(((struct tracker *)0)->rates[0]))

struct tracker_budget tracker_budget_default(double threshold)
{
	return (struct tracker_budget){ .pct = TRACKER_BUDGET_PCT_DEFAULT,
					.stall_ms = TRACKER_STALL_MS_DEFAULT,
					.threshold = threshold };
}

void tracker_hold(struct tracker *t, bool hold)
{
	pthread_mutex_lock(&t->w.lock);
	/* Counted: a snapshot may start while the last one's writer still tidies up. */
	if (hold)
		t->held++, t->holds++;
	else if (t->held > 0)
		t->held--;
	pthread_cond_broadcast(&t->w.cond);
	/* An open window is closed first: protecting memory for a snapshot while KVM maps
	 * it with small pages would cost a fault per page afterwards. */
	while (hold && t->logging)
		pthread_cond_wait(&t->w.cond, &t->w.lock);
	pthread_mutex_unlock(&t->w.lock);
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

/* xorshift64: which page of a region a sample takes needs no better. */
static uint64_t tracker_random(struct tracker *t)
{
	t->rng ^= t->rng << 13;
	t->rng ^= t->rng >> 7;
	t->rng ^= t->rng << 17;
	return t->rng;
}

/* How many pages the next window may watch at @now: the stall bound's count, less
 * what the windows that ended within the last second faulted, against the budget of
 * a second. */
static uint64_t tracker_allowance(const struct tracker *t, double now)
{
	double left = t->budget.pct / 100.0 / t->fault_s;

	for (unsigned i = 0; i < t->n_recent && i < DIRTY_RECENT; i++)
		if (now - t->recent[i].end < 1.0)
			left -= (double)t->recent[i].faults;
	if (left < 1)
		return 0;
	return left < (double)t->max_sample ? (uint64_t)left : t->max_sample;
}

/* A resident page of region @r not yet in the window's mask, from a random start;
 * UINT64_MAX when there is none. */
static uint64_t tracker_pick_in(struct tracker *t, uint64_t r)
{
	uint64_t per = t->cov.region_size / PAGE_SIZE, first = r * per;
	uint64_t pages = coverage_region_pages(&t->cov, r), start;

	if (!coverage_count_bits(t->present, first, pages))
		return UINT64_MAX;
	start = tracker_random(t) % pages;
	for (uint64_t i = 0; i < pages; i++) {
		uint64_t p = first + (start + i) % pages, bit = 1ULL << (p % 64);

		if ((t->present[p / 64] & bit) && !(t->mask[p / 64] & bit))
			return p;
	}
	return UINT64_MAX;
}

/* Whether region @r's coverage is known and far from the threshold: such a region is
 * sampled one visit in DIRTY_SETTLED_EVERY, the samples going where they decide more.
 * Lock held. */
static bool tracker_settled(struct tracker *t, uint64_t r, double plan)
{
	double c, thr = t->budget.threshold;

	if (t->cov.seconds[r] <= 0)
		return false;
	c = coverage_of(&t->cov, r, plan);
	return c < thr - DIRTY_SETTLED_BELOW || c > thr + DIRTY_SETTLED_ABOVE;
}

/* Up to @want sampled pages of one region into t->sample and t->mask, the next region
 * after the last window's that holds data (and is not skipped as settled); returns
 * how many. One region a window: watching a page makes KVM split the huge mapping
 * around it, and the guest then refaults that region's pages at 4 KiB until logging
 * ends, a cost no fault count shows (measured: 20 pages in 20 regions a window took
 * ~20% of zipfbench's updates; in one region, 4.7-5.0 M updates/s against 4.7-5.3 M
 * untracked, within the noise). */
static uint64_t tracker_pick(struct tracker *t, uint64_t want, double plan)
{
	uint64_t n = 0, nr = t->cov.n_regions;

	memset(t->mask, 0, t->ram_size / PAGE_SIZE / 8);
	pthread_mutex_lock(&t->w.lock);
	for (uint64_t tries = 0; !n && tries < 2 * nr; tries++) {
		uint64_t r = t->cursor++ % nr;

		if (tries < nr && tracker_settled(t, r, plan) &&
		    tracker_random(t) % DIRTY_SETTLED_EVERY)
			continue;
		for (uint64_t p; n < want && (p = tracker_pick_in(t, r)) != UINT64_MAX; n++) {
			t->mask[p / 64] |= 1ULL << (p % 64);
			t->sample[n] = (uint32_t)p;
		}
	}
	pthread_mutex_unlock(&t->w.lock);
	return n;
}

static bool tracker_written(const struct tracker *t, uint64_t p)
{
	return (t->bitmap[p / 64] >> (p % 64)) & 1;
}

/* The guest's progress rate over @wall seconds without a snapshot or an audit (the
 * windows hardly slow it): the fastest of the last DIRTY_RATES, so that a stretch in
 * which the guest waited for input does not make it seem slow. Lock held. */
static void tracker_rate(struct tracker *t, uint64_t progress, double wall)
{
	double best = 0;

	t->rates[t->n_rates++ % DIRTY_RATES] = (double)progress / wall;
	for (unsigned i = 0; i < t->n_rates && i < DIRTY_RATES; i++)
		best = t->rates[i] > best ? t->rates[i] : best;
	t->progress_rate = best >= DIRTY_RATE_MIN ? best : 0;
}

/* Where the progress rate is being timed from: the count, the time, the holds then. */
struct tracker_mark {
	uint64_t count, holds;
	double at;
};

static void tracker_mark_now(struct tracker *t, struct tracker_mark *m)
{
	pthread_mutex_lock(&t->w.lock);
	m->holds = t->holds;
	pthread_mutex_unlock(&t->w.lock);
	m->count = tracker_progress_now(t);
	m->at = mono_s();
}

/* Every DIRTY_RATE_S since @m: the rate over that time, unless a snapshot (or an
 * audit, @slowed) came in between; then timing starts afresh. */
static void tracker_time_rate(struct tracker *t, struct tracker_mark *m, bool slowed)
{
	double wall = mono_s() - m->at;
	uint64_t progress = tracker_progress_since(t, m->count);

	if (!slowed && wall < DIRTY_RATE_S)
		return;
	pthread_mutex_lock(&t->w.lock);
	if (!slowed && t->holds == m->holds && t->progress.read)
		tracker_rate(t, progress, wall);
	pthread_mutex_unlock(&t->w.lock);
	tracker_mark_now(t, m);
}

/* A window's cost into the budget's accounts: @faults faults, each DIRTY_FAULT_S, all
 * of which may have fallen within one span of one vCPU. Called with the lock held. */
static void tracker_charge(struct tracker *t, uint64_t faults, double now)
{
	double cost = (double)faults * t->fault_s;

	t->recent[t->n_recent++ % DIRTY_RECENT] = (typeof(t->recent[0])){ now, faults };
	t->faults += faults;
	t->lost_s += cost;
	if (cost > t->longest_stall_s)
		t->longest_stall_s = cost;
	t->windows++;
}

/* A window that watched for @wall seconds: each sample, written or not, into its
 * region's counts, folded once a region holds enough. Lock held. */
static void tracker_fold(struct tracker *t, uint64_t n, double wall)
{
	uint64_t per = t->cov.region_size / PAGE_SIZE;

	for (uint64_t i = 0; i < n; i++) {
		uint64_t r = t->sample[i] / per;

		bool w = tracker_written(t, t->sample[i]);

		t->acc_k[r]++;
		t->acc_w[r] += w;
		t->acc_e[r] += (float)wall;
		/* Pre-copy rounds defer the pages written lately: these are known to be. */
		if (w)
			heat_mark(&t->heat, t->sample[i]);
	}
	coverage_add_samples(&t->cov, t->acc_w, t->acc_k, t->acc_e, DIRTY_FOLD_SAMPLES);
	t->harvests++;
	t->last_ran_s = t->last_wall_s = wall;
	t->last_fault_us = t->fault_s * 1e6;
}

/* Samples written so far (t->bitmap read). */
static uint64_t tracker_count_samples(const struct tracker *t, uint64_t n)
{
	uint64_t w = 0;

	for (uint64_t i = 0; i < n; i++)
		w += tracker_written(t, t->sample[i]);
	return w;
}

/* Watch until @plan seconds passed, every sample was written (nothing more to learn
 * from them), a snapshot comes or the tracker stops; the log read every
 * DIRTY_POLL_S. Returns 0 with t->bitmap read, or -errno. */
static int tracker_watch_samples(struct tracker *t, uint64_t n, double w0, double plan)
{
	for (;;) {
		double left = plan - (mono_s() - w0);
		bool stop = tracker_sleep(t, left < DIRTY_POLL_S ? left : DIRTY_POLL_S, true);
		int rc = tracker_get(t);

		if (rc || stop || tracker_held(t) || mono_s() - w0 >= plan ||
		    tracker_count_samples(t, n) == n)
			return rc;
	}
}

/*
 * One sampled window of @plan seconds watching up to @want pages: logging on, the
 * sample watched, logging off at its end, once every sample was written, or when a
 * snapshot comes. Every written sample was a fault and is charged; the samples fold
 * in with how long they were watched.
 */
static int tracker_sampled_window(struct tracker *t, double plan, uint64_t want)
{
	uint64_t n, faults;
	double w0 = mono_s(), wall;
	bool open;
	int rc = tracker_mark_present(t);

	n = rc ? 0 : tracker_pick(t, want, plan);
	pthread_mutex_lock(&t->w.lock);
	open = t->logging = n && !t->held;
	pthread_mutex_unlock(&t->w.lock);
	if (!open)
		return rc;
	rc = tracker_logging(t, true);
	if (!rc)
		rc = tracker_watch(t, t->mask);
	if (!rc)
		rc = tracker_watch_samples(t, n, w0, plan);
	if (tracker_logging(t, false) && !rc)
		rc = -EIO;
	wall = mono_s() - w0;
	faults = rc ? n : tracker_count_samples(t, n);
	pthread_mutex_lock(&t->w.lock);
	tracker_charge(t, faults, mono_s());
	/* A window cut short still says what its samples did while watched (one closed
	 * early because all were written, all it could). */
	if (!rc && (wall >= DIRTY_SAMPLE_MIN_S || faults == n))
		tracker_fold(t, n, wall);
	log_debug("coverage window: %.3f s of %.3f, %llu of %llu sampled pages written",
		  wall, plan, (unsigned long long)faults, (unsigned long long)n);
	t->logging = false;
	pthread_cond_broadcast(&t->w.cond);
	pthread_mutex_unlock(&t->w.lock);
	return rc;
}

/*
 * Wait @gap seconds, timing the guest's progress meanwhile in steps of DIRTY_RATE_S:
 * its normal rate is that of the fastest step in which no snapshot ran and which
 * follows one at least half as fast (the guest runs slower during and just after a
 * snapshot, or while it starts up). Serves a tracker without windows. True when
 * stopping.
 */
static bool tracker_gap(struct tracker *t, double gap)
{
	double end = mono_s() + gap, best = 0, prev = -1;
	bool timed = false;

	for (double now = mono_s(); now < end; now = mono_s()) {
		double step = end - now < DIRTY_RATE_S ? end - now : DIRTY_RATE_S, rate;
		uint64_t c0 = tracker_progress_now(t);

		if (tracker_sleep(t, step > 0.05 ? step : 0.05, true))
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

/* The window to open next, its length, or 0 with the time to wait in *@wait. */
static uint64_t tracker_next(struct tracker *t, double *plan, double *wait)
{
	uint64_t want;

	pthread_mutex_lock(&t->w.lock);
	*plan = t->window_s > DIRTY_SAMPLE_MIN_S ? t->window_s : DIRTY_SAMPLE_MIN_S;
	want = tracker_allowance(t, mono_s());
	pthread_mutex_unlock(&t->w.lock);
	/* Apart by more than a span, so that no span sees two windows' faults. */
	*wait = want ? 2 * TRACKER_STALL_SPAN_S : DIRTY_BUDGET_WAIT_S;
	return want;
}

/* Windows, one after another within the budget (and an audit now and then), until
 * stopped or the log fails; the guest's progress rate timed throughout. */
static int tracker_windows(struct tracker *t)
{
	struct tracker_mark mark;

	t->next_audit = mono_s() + DIRTY_AUDIT_FIRST_S;
	tracker_mark_now(t, &mark);
	while (!tracker_wait_unheld(t)) {
		double plan, wait;
		uint64_t want = tracker_next(t, &plan, &wait);
		bool audit = t->budget.audit && mono_s() >= t->next_audit;
		int rc = 0;

		if (audit) {
			uint64_t audits = t->audit.audits;

			rc = tracker_audit_window(t, plan);
			/* One a snapshot cut too short is tried again soon. */
			t->next_audit = mono_s() + (t->audit.audits > audits ? DIRTY_AUDIT_EVERY_S :
						     DIRTY_AUDIT_RETRY_S);
		} else if (want) {
			rc = tracker_sampled_window(t, plan, want);
		}
		if (rc)
			return rc;
		tracker_time_rate(t, &mark, audit);
		if (tracker_sleep(t, wait, false))
			break;
	}
	return 0;
}

static void *tracker_thread(void *arg)
{
	struct tracker *t = arg;
	int rc = 0;

	role_enter(ROLE_HELPER);
	if (tracker_gap(t, DIRTY_FIRST_S))
		goto out;
	if (t->log.ops && (t->max_sample || t->budget.audit))
		rc = tracker_windows(t);
	else
		while (!tracker_wait_unheld(t) && !tracker_gap(t, DIRTY_NOLOG_GAP_S))
			;
	if (rc)
		log_warn("coverage tracker stopped: %s", strerror(-rc));
out:
	pthread_mutex_lock(&t->w.lock);
	t->logging = false;
	pthread_cond_broadcast(&t->w.cond);
	pthread_mutex_unlock(&t->w.lock);
	return NULL;
}

/* The most pages a window may watch: a fault each at most, within the stall bound
 * (none when it, or the budget, allows not even one). */
static uint64_t tracker_max_sample(const struct tracker *t)
{
	double n = t->budget.stall_ms / 1000.0 / t->fault_s;
	double per_s = t->budget.pct / 100.0 / t->fault_s;

	if (per_s < n)
		n = per_s;
	return n >= 1 ? (uint64_t)n : 0;
}

/* Everything but the log: buffers, coverage, the thread. @t->log is set. */
static int tracker_start(struct tracker *t, uint8_t *host, uint64_t ram_size,
		       uint64_t region_size, unsigned window_ms, struct tracker_progress progress)
{
	uint64_t words = ram_size / PAGE_SIZE / 64;
	int rc;

	t->host = host;
	t->ram_size = ram_size;
	t->adaptive = window_ms == 0;
	t->progress = progress;
	t->window_s = window_ms ? window_ms / 1000.0 : DIRTY_WINDOW_DEF;
	t->fault_s = DIRTY_FAULT_S;
	t->max_sample = tracker_max_sample(t);
	t->rng = (uint64_t)(uintptr_t)t ^ mono_ns() ^ 0x9e3779b97f4a7c15ULL;
	worker_init(&t->w);
	rc = coverage_init(&t->cov, ram_size, region_size);
	if (!rc)
		rc = heat_init(&t->heat, ram_size / PAGE_SIZE);
	if (rc)
		return rc;
	t->bitmap = calloc(words, sizeof(uint64_t));
	t->present = calloc(words, sizeof(uint64_t));
	t->mask = calloc(words, sizeof(uint64_t));
	t->sample = calloc(t->max_sample + 1, sizeof(uint32_t));
	t->acc_w = calloc(t->cov.n_regions, sizeof(uint32_t));
	t->acc_k = calloc(t->cov.n_regions, sizeof(uint32_t));
	t->acc_e = calloc(t->cov.n_regions, sizeof(float));
	t->hot = calloc(t->cov.n_regions, 1);
	if (!t->bitmap || !t->present || !t->mask || !t->sample || !t->acc_w || !t->acc_k ||
	    !t->acc_e || !t->hot)
		return -ENOMEM;
	return worker_start(&t->w, tracker_thread, t);
}

int tracker_init(struct tracker *t, const struct tracker_log *log, uint8_t *host,
		   uint64_t ram_size, uint64_t region_size, unsigned window_ms,
		   struct tracker_progress progress, const struct tracker_budget *budget)
{
	memset(t, 0, sizeof(*t));
	if (log)
		t->log = *log;
	t->budget = budget ? *budget : tracker_budget_default(TRACKER_THRESHOLD_DEFAULT);
	if (t->budget.pct < 0 || t->budget.pct > 100 || t->budget.stall_ms < 0)
		return -EINVAL;
	return tracker_start(t, host, ram_size, region_size, window_ms, progress);
}

void tracker_fini(struct tracker *t)
{
	worker_stop(&t->w);
	coverage_fini(&t->cov);
	heat_fini(&t->heat);
	free(t->bitmap);
	free(t->present);
	free(t->mask);
	free(t->sample);
	free(t->acc_w);
	free(t->acc_k);
	free(t->acc_e);
	free(t->hot);
	t->hot = NULL;
	t->bitmap = t->present = t->mask = NULL;
	t->sample = t->acc_w = t->acc_k = NULL;
	t->acc_e = NULL;
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
	 * snapshot in which the guest hardly ran cannot be timed by it. One in which it
	 * ran little still can: a snapshot whose write faults slow the guest tenfold is
	 * the one whose write set matters most, and it comes free. */
	if (t->progress_rate <= 0 || (double)progress < t->progress_rate * DIRTY_OBS_MIN_S ||
	    progress < DIRTY_OBS_MIN_STEPS) {
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
