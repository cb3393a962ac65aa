/*
 * dirty.c - the coverage tracker.
 *
 * KVM dirty logging with manual protect (KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2): harvesting
 * (KVM_GET_DIRTY_LOG) and re-protecting (KVM_CLEAR_DIRTY_LOG) are separate, which lets
 * the tracker measure in windows with gaps in between. A window starts by clearing the
 * log (the guest's next write to each page is logged, and costs a fault); after
 * window_s the log is read and folded into per-region coverage (coverage.c); then the
 * log is left alone for DIRTY_GAP windows, during which pages stay writable and cost
 * nothing. On our nested hosts each logged first write is a ~40 us fault (and dirty
 * logging makes KVM map guest memory with 4 KiB pages), so a tracker that never rests
 * slows a write-heavy guest badly: measuring one window in ten keeps the cost at a
 * tenth of that, at the price of a staler estimate. Works alongside userfaultfd
 * write protection on the same memory.
 */
#include "dirty.h"

#include <errno.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#define DIRTY_GAP        9.0   /* idle time after each window, in windows (10% duty) */
#define DIRTY_WINDOW_MIN 0.5
#define DIRTY_WINDOW_MAX 10.0
#define DIRTY_WINDOW_DEF 1.0

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int dirty_get(struct dirty_tracker *t, bool clear)
{
	struct kvm_dirty_log log = { .slot = 0, .dirty_bitmap = t->bitmap };
	struct kvm_clear_dirty_log clr = {
		.slot = 0, .first_page = 0, .num_pages = (uint32_t)(t->ram_size / COV_PAGE),
		.dirty_bitmap = t->bitmap,
	};
	uint64_t t0 = now_ns();
	int rc = 0;

	if (ioctl(t->vm_fd, KVM_GET_DIRTY_LOG, &log) < 0)
		rc = -errno;
	else if (clear && ioctl(t->vm_fd, KVM_CLEAR_DIRTY_LOG, &clr) < 0)
		rc = -errno;
	t->harvest_ns += now_ns() - t0;
	return rc;
}

/* Sleep @s seconds unless told to stop; returns true when stopping. */
static bool dirty_sleep(struct dirty_tracker *t, double s)
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
	while (!t->stop && pthread_cond_timedwait(&t->cond, &t->lock, &until) == 0)
		;
	stop = t->stop;
	pthread_mutex_unlock(&t->lock);
	return stop;
}

static void *dirty_thread(void *arg)
{
	struct dirty_tracker *t = arg;

	for (;;) {
		double w;

		pthread_mutex_lock(&t->lock);
		w = t->window_s;
		pthread_mutex_unlock(&t->lock);
		if (dirty_get(t, true) || dirty_sleep(t, w) || dirty_get(t, false))
			break;
		pthread_mutex_lock(&t->lock);
		coverage_add_window(&t->cov, t->bitmap);
		t->harvests++;
		pthread_mutex_unlock(&t->lock);
		if (dirty_sleep(t, w * DIRTY_GAP))
			break;
	}
	return NULL;
}

int dirty_init(struct dirty_tracker *t, int vm_fd, uint8_t *host, uint64_t ram_size,
	       uint64_t region_size, unsigned window_ms)
{
	struct kvm_enable_cap cap = { .cap = KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2,
				      .args[0] = KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE };
	struct kvm_userspace_memory_region region = {
		.slot = 0, .flags = KVM_MEM_LOG_DIRTY_PAGES, .guest_phys_addr = 0,
		.memory_size = ram_size, .userspace_addr = (uint64_t)(uintptr_t)host,
	};
	int rc;

	memset(t, 0, sizeof(*t));
	t->vm_fd = vm_fd;
	t->ram_size = ram_size;
	t->adaptive = window_ms == 0;
	t->window_s = window_ms ? window_ms / 1000.0 : DIRTY_WINDOW_DEF;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	rc = coverage_init(&t->cov, ram_size, region_size);
	if (rc)
		return rc;
	t->bitmap = calloc(ram_size / COV_PAGE / 64, sizeof(uint64_t));
	if (!t->bitmap)
		return -ENOMEM;
	if (ioctl(vm_fd, KVM_ENABLE_CAP, &cap) < 0 ||
	    ioctl(vm_fd, KVM_SET_USER_MEMORY_REGION, &region) < 0)
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
	t->bitmap = NULL;
}

uint64_t dirty_classify(struct dirty_tracker *t, double threshold, uint8_t *hot)
{
	uint64_t n = 0;

	pthread_mutex_lock(&t->lock);
	for (uint64_t r = 0; r < t->cov.n_regions; r++) {
		/* Before any window is measured nothing is known: all cold, unless the
		 * threshold says every region is hot anyway. */
		hot[r] = (t->cov.windows || threshold <= 0) && coverage_is_hot(&t->cov, r, threshold);
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
