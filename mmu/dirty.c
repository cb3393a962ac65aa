/*
 * dirty.c - the coverage tracker.
 *
 * KVM dirty logging (with manual protect, KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2) is switched
 * on only for a measuring window: turning KVM_MEM_LOG_DIRTY_PAGES on write-protects
 * guest memory and starts an empty log; when the window closes the log is read
 * (KVM_GET_DIRTY_LOG), folded into per-region coverage (coverage.c), and logging is
 * turned off again for DIRTY_GAP times the time the window cost the guest, so that
 * the tracker costs the guest about 3% at most. The first window opens DIRTY_FIRST_S
 * after the start. Only rewrites count: a page that was not resident when the window
 * opened is fresh memory being filled (no snapshot copies it), and a window in which
 * the guest mostly filled memory is not counted (start-up) and is tried again soon.
 *
 * A window is meant to show what the guest writes in the time it runs during a
 * snapshot (the last snapshot's duration). While logging, every first write to a page
 * is a fault the guest waits for (~40 us on our nested hosts), so a guest that writes
 * much memory gets a few per cent of its work done: a window stays open until the
 * guest has *run* the planned time (wall time less the faults, see dirty_window), or
 * four times that has passed, or a snapshot starts; coverage.c turns what it saw into
 * write rates, from which coverage over a snapshot's duration follows. (The vCPUs'
 * guest_time in /proc/self/stat
 * does not help: on kvm_pvm the faults count as guest time.)
 *
 * Why not leave logging on: while logging, KVM maps guest memory with 4 KiB pages, and
 * a snapshot's write protection then zaps and re-faults hundreds of thousands of small
 * mappings instead of a few hundred huge ones (measured: the guest ran 20x slower
 * under periodic snapshots). So a snapshot first closes the open window (dirty_hold),
 * and no window opens while it runs. Works alongside userfaultfd write protection on
 * the same memory.
 */
#include "dirty.h"

#include "../vmm/log.h"

#include <errno.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>

#define DIRTY_GAP         32.0  /* idle after a window, in the guest's time lost to it */
#define DIRTY_RETRY       4.0   /* the same, after a window that did not count */
#define DIRTY_FIRST_S     1.0   /* no window before: start-up is not what a guest writes later */
#define DIRTY_WINDOW_MIN  0.25
#define DIRTY_WINDOW_MAX  10.0
#define DIRTY_WINDOW_DEF  1.0
#define DIRTY_WALL_FACTOR 4.0   /* a window closes after this many planned lengths, wall */
#define DIRTY_MIN_SHARE   0.01  /* a guest that ran less of the plan says too little */
#define DIRTY_RAN_FLOOR   0.02  /* the least share of a window taken as the guest's run */
#define DIRTY_STEP_S      0.05  /* how often an open window reads the log */
#define DIRTY_FAULT_MIN   5e-6  /* bounds of the cost of a dirty-logging fault, s */
#define DIRTY_FAULT_MAX   100e-6
#define DIRTY_FAULT_BATCH 256   /* new dirty pages in a step to time a fault by */

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t now_ns(void)
{
	return (uint64_t)(mono_s() * 1e9);
}

/* Pages marked in the dirty bitmap. */
static uint64_t dirty_count(const struct dirty_tracker *t)
{
	return coverage_count_bits(t->bitmap, 0, t->ram_size / COV_PAGE);
}

/* Which pages of RAM hold data now (host-resident): a write to any other page is the
 * guest filling fresh memory, which no snapshot has to copy. */
static int dirty_mark_present(struct dirty_tracker *t)
{
	uint64_t pages = t->ram_size / COV_PAGE;

	if (mincore(t->host, t->ram_size, t->resident) < 0)
		return -errno;
	memset(t->present, 0, pages / 8);
	for (uint64_t p = 0; p < pages; p++)
		if (t->resident[p] & 1)
			t->present[p / 64] |= 1ULL << (p % 64);
	return 0;
}

/* Keep only rewrites in the bitmap; returns how many pages it keeps. */
static uint64_t dirty_keep_rewrites(struct dirty_tracker *t)
{
	for (uint64_t i = 0; i < t->ram_size / COV_PAGE / 64; i++)
		t->bitmap[i] &= t->present[i];
	return dirty_count(t);
}

/* Dirty logging on or off for the RAM memslot. */
static int dirty_logging(struct dirty_tracker *t, bool on)
{
	struct kvm_userspace_memory_region region = {
		.slot = 0, .flags = on ? KVM_MEM_LOG_DIRTY_PAGES : 0, .guest_phys_addr = 0,
		.memory_size = t->ram_size, .userspace_addr = (uint64_t)(uintptr_t)t->host,
	};
	uint64_t t0 = now_ns();
	int rc = ioctl(t->vm_fd, KVM_SET_USER_MEMORY_REGION, &region) < 0 ? -errno : 0;

	t->harvest_ns += now_ns() - t0;
	return rc;
}

static int dirty_get(struct dirty_tracker *t)
{
	struct kvm_dirty_log log = { .slot = 0, .dirty_bitmap = t->bitmap };
	uint64_t t0 = now_ns();
	int rc = ioctl(t->vm_fd, KVM_GET_DIRTY_LOG, &log) < 0 ? -errno : 0;

	t->harvest_ns += now_ns() - t0;
	return rc;
}

void dirty_hold(struct dirty_tracker *t, bool hold)
{
	pthread_mutex_lock(&t->lock);
	/* Counted: a snapshot may start while the last one's writer still tidies up. */
	if (hold)
		t->held++;
	else if (t->held > 0)
		t->held--;
	pthread_cond_broadcast(&t->cond);
	/* An open window is closed first: protecting memory for a snapshot while KVM maps
	 * it with small pages would cost a fault per page afterwards. */
	while (hold && t->logging)
		pthread_cond_wait(&t->cond, &t->lock);
	pthread_mutex_unlock(&t->lock);
}

/* Sleep @s seconds unless told to stop, or (@wake_on_hold) a snapshot is coming;
 * returns true when stopping. */
static bool dirty_sleep(struct dirty_tracker *t, double s, bool wake_on_hold)
{
	struct timespec until;
	bool stop;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)s;
	until.tv_nsec += (long)((s - (double)(time_t)s) * 1e9);
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&t->lock);
	while (!t->stop && !(wake_on_hold && t->held) &&
	       pthread_cond_timedwait(&t->cond, &t->lock, &until) == 0)
		;
	stop = t->stop;
	pthread_mutex_unlock(&t->lock);
	return stop;
}

static bool dirty_held(struct dirty_tracker *t)
{
	bool held;

	pthread_mutex_lock(&t->lock);
	held = t->held;
	pthread_mutex_unlock(&t->lock);
	return held;
}

/* Wait while a snapshot runs; true when stopping. */
static bool dirty_wait_unheld(struct dirty_tracker *t)
{
	bool stop;

	pthread_mutex_lock(&t->lock);
	while (t->held && !t->stop)
		pthread_cond_wait(&t->cond, &t->lock);
	stop = t->stop;
	pthread_mutex_unlock(&t->lock);
	return stop;
}

/* How long the guest ran in @wall seconds in which it dirtied @d pages, each a fault
 * of @fault seconds. In a window where the guest did little else than fault, this is
 * a small difference of two large numbers, and a fault's cost is known to a few per
 * cent only: it is never taken below DIRTY_RAN_FLOOR of the wall time (zipfbench's own
 * reports showed it doing 2.5% of its normal work during such a window). */
static double dirty_ran(double wall, uint64_t d, double fault)
{
	double ran = wall - (double)d * fault;

	return ran > wall * DIRTY_RAN_FLOOR ? ran : wall * DIRTY_RAN_FLOOR;
}

static void dirty_acc_reset(struct dirty_tracker *t)
{
	t->acc_ran = t->acc_wall = 0;
	memset(t->acc, 0, t->ram_size / COV_PAGE / 8);
}

/* Add a closed window to the one being assembled: windows that snapshots cut short
 * (back-to-back snapshots leave a guest little time between them) add up until the
 * guest has run enough. A window in which the guest mostly filled fresh memory
 * (@rewrites false: start-up) says nothing about rewrites and restarts the assembly.
 * True when the assembled window is ready to count. */
static bool dirty_accumulate(struct dirty_tracker *t, bool rewrites, double ran, double wall,
			     double plan)
{
	if (!rewrites) {
		dirty_acc_reset(t);
		return false;
	}
	for (uint64_t i = 0; i < t->ram_size / COV_PAGE / 64; i++)
		t->acc[i] |= t->bitmap[i];
	t->acc_ran += ran;
	t->acc_wall += wall;
	return t->acc_ran >= plan * DIRTY_MIN_SHARE;
}

/*
 * One measuring window: logging on until the guest has run the planned time, or
 * DIRTY_WALL_FACTOR times that has passed, or a snapshot is coming. While logging,
 * every first write to a page is a fault the guest waits for (~40 us on our nested
 * hosts), so a guest that writes much memory gets little done: the log is read every
 * step, and the time the guest ran is the wall time less a fault per page found
 * dirty. The fault's cost is the shortest time per newly dirty page seen in a step
 * (then the guest did nothing but fault), within DIRTY_FAULT_MIN..MAX. What the
 * window saw is folded in with the time the guest ran (coverage.c). Stores its wall
 * length in @wall, the time the guest lost to faults in @lost, and in @counted
 * whether the window went into the coverage.
 */
static int dirty_window(struct dirty_tracker *t, double *wall, double *lost, bool *counted)
{
	double plan, ran = 0, w0 = mono_s(), t_prev = w0, fault = DIRTY_FAULT_MAX;
	uint64_t d = 0, d_prev = 0, kept;
	bool open;
	int rc;

	pthread_mutex_lock(&t->lock);
	plan = t->window_s;
	open = t->logging = !t->held;
	pthread_mutex_unlock(&t->lock);
	*wall = *lost = 0;
	if (!open)
		return 0;
	rc = dirty_mark_present(t);
	if (!rc)
		rc = dirty_logging(t, true);
	while (!rc && ran < plan && mono_s() - w0 < plan * DIRTY_WALL_FACTOR &&
	       !dirty_sleep(t, DIRTY_STEP_S, true) && !dirty_held(t)) {
		double now;

		rc = dirty_get(t);
		now = mono_s();
		d = dirty_count(t);
		if (d >= d_prev + DIRTY_FAULT_BATCH) {
			double per = (now - t_prev) / (double)(d - d_prev);

			fault = per < fault ? (per < DIRTY_FAULT_MIN ? DIRTY_FAULT_MIN : per) : fault;
		}
		d_prev = d;
		t_prev = now;
		ran = dirty_ran(now - w0, d, fault);
	}
	if (!rc)
		rc = dirty_get(t);
	if (dirty_logging(t, false) && !rc)
		rc = -EIO;
	*wall = mono_s() - w0;
	if (!rc) {
		d = dirty_count(t);
		ran = dirty_ran(*wall, d, fault);
	}
	*lost = *wall - ran;
	pthread_mutex_lock(&t->lock);
	kept = rc ? 0 : dirty_keep_rewrites(t);
	*counted = !rc && dirty_accumulate(t, 2 * kept >= d, ran, *wall, plan);
	log_debug("coverage window: %.3f s open, guest ran %.3f s of %.3f, %llu pages written "
		  "(%llu rewrites), fault %.1f us: %s", *wall, ran, plan, (unsigned long long)d,
		  (unsigned long long)kept, fault * 1e6, *counted ? "counted" : "not yet counted");
	if (*counted) {
		coverage_add_window(&t->cov, t->acc, t->acc_ran);
		t->harvests++;
		t->last_ran_s = t->acc_ran;
		t->last_wall_s = t->acc_wall;
		t->last_fault_us = fault * 1e6;
		dirty_acc_reset(t);
	}
	t->lost_s += *lost;
	t->logging = false;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
	return rc;
}

static void *dirty_thread(void *arg)
{
	struct dirty_tracker *t = arg;
	double wall = 0;
	int rc = 0;

	if (dirty_sleep(t, DIRTY_FIRST_S, false))
		goto out;
	while (!dirty_wait_unheld(t)) {
		double lost, gap;
		bool counted = false;

		rc = dirty_window(t, &wall, &lost, &counted);
		/* The gap keeps the guest's loss to windows near 1 / DIRTY_GAP (~3%). A window
		 * that did not count (cut short by a snapshot, or start-up filling memory) is
		 * tried again sooner: such windows cost the guest up to 1 / DIRTY_RETRY. */
		gap = lost * (counted ? DIRTY_GAP : DIRTY_RETRY);
		if (rc || dirty_sleep(t, gap > DIRTY_STEP_S ? gap : DIRTY_STEP_S, false))
			break;
	}
	if (rc)
		log_warn("coverage tracker stopped: %s", strerror(-rc));
out:
	pthread_mutex_lock(&t->lock);
	t->logging = false;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

int dirty_init(struct dirty_tracker *t, int vm_fd, uint8_t *host, uint64_t ram_size,
	       uint64_t region_size, unsigned window_ms)
{
	struct kvm_enable_cap cap = { .cap = KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2,
				      .args[0] = KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE };
	int rc;

	memset(t, 0, sizeof(*t));
	t->vm_fd = vm_fd;
	t->host = host;
	t->ram_size = ram_size;
	t->adaptive = window_ms == 0;
	t->window_s = window_ms ? window_ms / 1000.0 : DIRTY_WINDOW_DEF;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	rc = coverage_init(&t->cov, ram_size, region_size);
	if (rc)
		return rc;
	t->bitmap = calloc(ram_size / COV_PAGE / 64, sizeof(uint64_t));
	t->present = calloc(ram_size / COV_PAGE / 64, sizeof(uint64_t));
	t->acc = calloc(ram_size / COV_PAGE / 64, sizeof(uint64_t));
	t->resident = malloc(ram_size / COV_PAGE);
	if (!t->bitmap || !t->present || !t->acc || !t->resident)
		return -ENOMEM;
	/* Manual protect: reading the log does not re-protect pages behind our back. */
	if (ioctl(vm_fd, KVM_ENABLE_CAP, &cap) < 0)
		return -errno;
	if (pthread_create(&t->thread, NULL, dirty_thread, t))
		return -EAGAIN;
	t->running = true;
	return 0;
}

void dirty_fini(struct dirty_tracker *t)
{
	if (t->running) {
		pthread_mutex_lock(&t->lock);
		t->stop = true;
		pthread_cond_broadcast(&t->cond);
		pthread_mutex_unlock(&t->lock);
		pthread_join(t->thread, NULL);
		t->running = false;
	}
	coverage_fini(&t->cov);
	free(t->bitmap);
	free(t->present);
	free(t->acc);
	free(t->resident);
	t->bitmap = t->present = t->acc = NULL;
	t->resident = NULL;
}

uint64_t dirty_classify(struct dirty_tracker *t, double threshold, uint8_t *hot)
{
	uint64_t n = 0;

	pthread_mutex_lock(&t->lock);
	for (uint64_t r = 0; r < t->cov.n_regions; r++) {
		/* Before any window is measured nothing is known: all cold, unless the
		 * threshold says every region is hot anyway. */
		hot[r] = (t->cov.windows || threshold <= 0) && coverage_is_hot(&t->cov, r, threshold, t->window_s);
		n += hot[r];
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}

void dirty_snapshot_took(struct dirty_tracker *t, double seconds)
{
	if (!t->adaptive)
		return;
	if (seconds < DIRTY_WINDOW_MIN)
		seconds = DIRTY_WINDOW_MIN;
	if (seconds > DIRTY_WINDOW_MAX)
		seconds = DIRTY_WINDOW_MAX;
	pthread_mutex_lock(&t->lock);
	t->window_s = seconds;
	pthread_mutex_unlock(&t->lock);
}
