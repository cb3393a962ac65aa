/*
 * tracker_log.c - the coverage tracker's calls on the dirty log, timed; its waits; and
 * the audit's full window (--coverage-audit).
 *
 * The audit answers one question: do the hot regions the tracker learns within its
 * budget (tracker.c) match what an unbudgeted window would have said? Its window is
 * the tracker's old one without its cap on the loss: logging on, every resident page
 * watched, open until the guest has run the planned time (AUDIT_WALL_MAX at most). That
 * costs the guest a fault per page it writes, which is why the audit is a measuring
 * aid, off by default, and its cost is kept apart from the budget's. Its
 * window is folded into a coverage of its own, never into the tracker's: measuring
 * must not change what is measured.
 */
#include "tracker_impl.h"
#include "resident.h"
#include "../base/mono.h"
#include "../base/log.h"
#include "../base/pages.h"

#include <errno.h>
#include <string.h>

#define AUDIT_WALL_MAX  10.0 /* the window closes after this long, whatever the guest ran */
#define AUDIT_STEP_S    0.05 /* how often it reads the log */
#define AUDIT_RAN_FLOOR 0.02 /* the least share of the window taken as the guest's run */
#define AUDIT_MIN_RAN_S 0.1  /* a window in which the guest ran less is not compared */

int tracker_logging(struct tracker *t, bool on)
{
	uint64_t t0 = mono_ns();
	int rc = t->log.ops->logging(t->log.ctx, on);

	t->harvest_ns += mono_ns() - t0;
	return rc;
}

/* Watching a page clears its dirty bit, which write-protects it (logging started with
 * every page marked dirty and none protected). */
int tracker_watch(struct tracker *t, uint64_t *pages)
{
	uint64_t t0 = mono_ns();
	int rc = t->log.ops->watch(t->log.ctx, pages);

	t->harvest_ns += mono_ns() - t0;
	return rc;
}

int tracker_get(struct tracker *t)
{
	uint64_t t0 = mono_ns();
	int rc = t->log.ops->get(t->log.ctx, t->bitmap);

	t->harvest_ns += mono_ns() - t0;
	return rc;
}

static void tracker_set_run(void *ctx, uint64_t first, uint64_t n)
{
	uint64_t *bits = ctx;

	for (uint64_t p = first; p < first + n; p++)
		bits[p / 64] |= 1ULL << (p % 64);
}

/* A write to a page that is not resident is the guest filling fresh memory, which no
 * snapshot has to copy: only resident pages are watched. */
int tracker_mark_present(struct tracker *t)
{
	memset(t->present, 0, t->ram_size / PAGE_SIZE / 8);
	return resident_scan(t->host, t->ram_size, tracker_set_run, t->present);
}

bool tracker_sleep(struct tracker *t, double s, bool wake_on_hold)
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

bool tracker_held(struct tracker *t)
{
	bool held;

	pthread_mutex_lock(&t->w.lock);
	held = t->held;
	pthread_mutex_unlock(&t->w.lock);
	return held;
}

uint64_t tracker_progress_now(const struct tracker *t)
{
	return t->progress.read ? t->progress.read(t->progress.ctx) : 0;
}

uint64_t tracker_progress_since(const struct tracker *t, uint64_t c0)
{
	uint64_t c = tracker_progress_now(t);

	return c > c0 ? c - c0 : 0;
}

/* How long the guest ran in the @wall seconds of a full window in which it dirtied @d
 * watched pages: by its progress since @c0 when it has a rate, else the wall time less
 * a fault per page (floored: a fault's cost is known to a few per cent only). */
static double audit_ran(const struct tracker *t, double wall, uint64_t d, uint64_t c0)
{
	double ran;

	if (t->progress_rate <= 0) {
		ran = wall - (double)d * t->fault_s;
		return ran > wall * AUDIT_RAN_FLOOR ? ran : wall * AUDIT_RAN_FLOOR;
	}
	ran = (double)tracker_progress_since(t, c0) / t->progress_rate;
	return ran > wall ? wall : ran;
}

/* Pages written among those watched (the others read as written throughout). */
static uint64_t audit_count(struct tracker *t)
{
	for (uint64_t i = 0; i < t->ram_size / PAGE_SIZE / 64; i++)
		t->bitmap[i] &= t->present[i];
	return coverage_count_bits(t->bitmap, 0, t->ram_size / PAGE_SIZE);
}

/* The hot regions of the tracker's coverage against @full's, at the audit threshold
 * over @plan seconds; called with the lock held. */
static void audit_compare(struct tracker *t, const struct coverage *full, double plan)
{
	uint64_t both = 0, learnt = 0, seen = 0;
	double thr = t->budget.threshold;

	for (uint64_t r = 0; r < t->cov.n_regions; r++) {
		bool b = coverage_known(&t->cov) && coverage_is_hot(&t->cov, r, thr, plan);
		bool f = coverage_is_hot(full, r, thr, plan);

		learnt += b;
		seen += f;
		both += b && f;
	}
	t->audit.precision = learnt ? (double)both / (double)learnt : 1.0;
	t->audit.recall = seen ? (double)both / (double)seen : 1.0;
	t->audit.audits++;
	log_debug("coverage audit: %llu regions hot as learnt, %llu in a full window, %llu in both",
		  (unsigned long long)learnt, (unsigned long long)seen, (unsigned long long)both);
}

/* Logging on, every resident page watched, until the guest ran @plan (AUDIT_WALL_MAX
 * at most) or a snapshot comes; stores the pages written in t->bitmap and the guest's
 * run. */
static int audit_watch(struct tracker *t, double plan, double *wall, double *ran)
{
	double w0 = mono_s();
	uint64_t c0 = tracker_progress_now(t), d = 0;
	int rc = tracker_mark_present(t);

	*ran = 0;
	if (!rc)
		rc = tracker_logging(t, true);
	if (!rc)
		rc = tracker_watch(t, t->present);
	while (!rc && *ran < plan && mono_s() - w0 < AUDIT_WALL_MAX &&
	       !tracker_sleep(t, AUDIT_STEP_S, true) && !tracker_held(t)) {
		rc = tracker_get(t);
		d = audit_count(t);
		*ran = audit_ran(t, mono_s() - w0, d, c0);
	}
	if (!rc)
		rc = tracker_get(t);
	if (tracker_logging(t, false) && !rc)
		rc = -EIO;
	*wall = mono_s() - w0;
	if (!rc)
		*ran = audit_ran(t, *wall, audit_count(t), c0);
	return rc;
}

int tracker_audit_window(struct tracker *t, double plan)
{
	struct coverage full;
	double wall = 0, ran = 0;
	bool open;
	int rc;

	pthread_mutex_lock(&t->w.lock);
	open = t->logging = !t->held;
	pthread_mutex_unlock(&t->w.lock);
	if (!open)
		return 0;
	rc = audit_watch(t, plan, &wall, &ran);
	if (!rc)
		rc = coverage_init(&full, t->ram_size, t->cov.region_size);
	pthread_mutex_lock(&t->w.lock);
	if (!rc) {
		coverage_add_window(&full, t->bitmap, t->present, ran);
		/* A window a snapshot cut very short says too little to judge by; a
		 * shorter one than planned is extrapolated, as coverage always is. */
		if (ran >= AUDIT_MIN_RAN_S)
			audit_compare(t, &full, plan);
		coverage_fini(&full);
	}
	t->audit.lost_s += wall - ran;
	t->logging = false;
	pthread_cond_broadcast(&t->w.cond);
	pthread_mutex_unlock(&t->w.lock);
	return rc;
}
