/*
 * dirty.c - the coverage tracker.
 *
 * KVM dirty logging (with manual protect, KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2) is switched
 * on only for a measuring window: turning KVM_MEM_LOG_DIRTY_PAGES on write-protects
 * guest memory and starts an empty log; after window_s the log is read
 * (KVM_GET_DIRTY_LOG), folded into per-region coverage (coverage.c), and logging is
 * turned off again for DIRTY_GAP windows. Why not leave it on: while logging, KVM maps
 * guest memory with 4 KiB pages, and on our nested hosts every fault costs ~40 us; a
 * snapshot's write protection then zaps and re-faults hundreds of thousands of small
 * mappings instead of a few hundred huge ones (measured: the guest ran 20x slower
 * under periodic snapshots). With logging off KVM maps huge pages again. No window is
 * measured while a snapshot runs (dirty_hold), and one that overlaps a snapshot is
 * thrown away. Works alongside userfaultfd
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
	t->held = hold;
	if (hold)
		t->spoiled = true;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
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
		bool held, spoiled;
		double w;

		pthread_mutex_lock(&t->lock);
		w = t->window_s;
		held = t->held;
		t->spoiled = false;
		pthread_mutex_unlock(&t->lock);
		if (held) {
			if (dirty_sleep(t, DIRTY_WINDOW_MIN))
				break;
			continue;
		}
		if (dirty_logging(t, true))
			break;
		if (dirty_sleep(t, w) || dirty_get(t) || dirty_logging(t, false))
			break;
		pthread_mutex_lock(&t->lock);
		spoiled = t->spoiled;
		if (!spoiled) {
			coverage_add_window(&t->cov, t->bitmap);
			t->harvests++;
		}
		pthread_mutex_unlock(&t->lock);
		if (dirty_sleep(t, w * DIRTY_GAP))
			break;
	}
	dirty_logging(t, false);
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
	if (!t->bitmap)
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
