/*
 * coverage.c - how much of each region the guest writes.
 *
 * The CCoW idea rests on one number per region: the share of its 4 KiB pages the guest
 * writes within a snapshot's duration. A region whose share reaches the threshold is
 * hot: on its first write fault during a snapshot, copying the whole region costs one
 * trap instead of hundreds. The dirty-page bitmaps come from KVM's dirty log
 * (tracker.c); this file only does the arithmetic, so it can be tested without KVM.
 *
 * A window's length seldom equals a snapshot's (the guest runs slowly while logging,
 * and snapshots vary), so each region keeps a write rate instead of a share: with
 * pages written at random times at a similar rate, the share unwritten after t
 * seconds is exp(-rate t). An observation that saw share s in t seconds gives
 * -ln(1 - s) "hits" in t; the rate is hits over seconds summed over observations, each
 * fold scaling what came before by COV_DECAY, so a long observation weighs more than a
 * short one and a single odd one does not flip a region. Coverage for any duration
 * follows from the rate.
 *
 * Observations come from two places: dirty-log windows (tracker.c), which watch a
 * sample of the resident pages, a region's samples folded once there are enough; and
 * each snapshot's own write set (snapshot/engine.c): which pages the guest wrote while
 * the snapshot watched them, the very thing coverage predicts. A snapshot's is timed
 * by the guest's progress rather than the clock, as the guest runs slower while its
 * pages trap; a window within its budget hardly slows the guest, and goes by the clock.
 */
#include "coverage.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define COV_DECAY 0.7f

int coverage_init(struct coverage *c, uint64_t ram_size, uint64_t region_size)
{
	memset(c, 0, sizeof(*c));
	if (region_size < COV_MIN_REGION || (region_size & (region_size - 1)) || !ram_size ||
	    ram_size % PAGE_SIZE)
		return -EINVAL;
	c->ram_size = ram_size;
	c->region_size = region_size;
	c->n_regions = (ram_size + region_size - 1) / region_size;
	c->hits = calloc(c->n_regions, sizeof(float));
	c->seconds = calloc(c->n_regions, sizeof(float));
	return c->hits && c->seconds ? 0 : -ENOMEM;
}

void coverage_fini(struct coverage *c)
{
	free(c->hits);
	free(c->seconds);
	memset(c, 0, sizeof(*c));
}

uint64_t coverage_region_pages(const struct coverage *c, uint64_t r)
{
	uint64_t start = r * c->region_size, end = start + c->region_size;

	if (r >= c->n_regions)
		return 0;
	if (end > c->ram_size)
		end = c->ram_size;
	return (end - start) / PAGE_SIZE;
}

/* Set bits among pages [first, first + n) of the bitmap. */
uint64_t coverage_count_bits(const uint64_t *bitmap, uint64_t first, uint64_t n)
{
	uint64_t count = 0, p = first, end = first + n;

	while (p < end && p % 64) {
		count += (bitmap[p / 64] >> (p % 64)) & 1;
		p++;
	}
	for (; p + 64 <= end; p += 64)
		count += (uint64_t)__builtin_popcountll(bitmap[p / 64]);
	for (; p < end; p++)
		count += (bitmap[p / 64] >> (p % 64)) & 1;
	return count;
}

/* Region @r: @written of @pages were written in @seconds. Pages are taken to be written
 * at random times, each at about the same rate, so the share still unwritten after t
 * seconds is exp(-rate * t). A region written whole counts as if half a page had
 * escaped, to keep the rate finite. */
static void coverage_fold(struct coverage *c, uint64_t r, uint64_t written, uint64_t pages,
			  double seconds)
{
	double left, floor;

	if (!pages || seconds <= 0)
		return;
	left = 1.0 - (double)written / (double)pages;
	floor = 0.5 / (double)pages;
	c->hits[r] = COV_DECAY * c->hits[r] + (float)-log(left > floor ? left : floor);
	c->seconds[r] = COV_DECAY * c->seconds[r] + (float)seconds;
}

void coverage_add_window(struct coverage *c, const uint64_t *written, const uint64_t *sampled,
			 double seconds)
{
	uint64_t per = c->region_size / PAGE_SIZE;

	if (seconds <= 0)
		return;
	for (uint64_t r = 0; r < c->n_regions; r++) {
		uint64_t pages = coverage_region_pages(c, r);
		uint64_t watched = sampled ? coverage_count_bits(sampled, r * per, pages) : pages;

		coverage_fold(c, r, coverage_count_bits(written, r * per, pages), watched, seconds);
	}
	c->windows++;
}

uint64_t coverage_add_samples(struct coverage *c, uint32_t *written, uint32_t *pages,
			      float *seconds, uint32_t min)
{
	uint64_t folded = 0;

	for (uint64_t r = 0; r < c->n_regions; r++) {
		if (!pages[r] || pages[r] < min)
			continue;
		/* Like a snapshot's observation: the share written over the mean watch. */
		coverage_fold(c, r, written[r], pages[r], (double)seconds[r] / pages[r]);
		written[r] = pages[r] = 0;
		seconds[r] = 0;
		folded++;
	}
	c->windows += folded > 0;
	return folded;
}

bool coverage_known(const struct coverage *c)
{
	return c->windows || c->snapshots;
}

double coverage_of(const struct coverage *c, uint64_t r, double seconds)
{
	if (r >= c->n_regions || c->seconds[r] <= 0)
		return 0.0;
	return 1.0 - exp(-(double)c->hits[r] / (double)c->seconds[r] * seconds);
}

void coverage_add_snapshot(struct coverage *c, const struct cov_obs *obs, double per_second)
{
	if (per_second <= 0)
		return;
	for (uint64_t r = 0; r < c->n_regions; r++)
		if (obs[r].pages)
			coverage_fold(c, r, obs[r].written, obs[r].pages,
				      obs[r].exposure / obs[r].pages / per_second);
	c->snapshots++;
}

bool coverage_is_hot(const struct coverage *c, uint64_t r, double threshold, double seconds)
{
	if (r >= c->n_regions)
		return false;
	return threshold <= 0 || coverage_of(c, r, seconds) >= threshold - 1e-6;
}

uint64_t coverage_classify(const struct coverage *c, double threshold, double seconds,
			   uint8_t *hot)
{
	uint64_t n = 0;

	for (uint64_t r = 0; r < c->n_regions; r++) {
		double keep = threshold - COV_HYSTERESIS;

		hot[r] = coverage_is_hot(c, r, threshold, seconds) ||
			 (hot[r] && keep > 0 && coverage_is_hot(c, r, keep, seconds));
		n += hot[r];
	}
	return n;
}

void coverage_histogram(const struct coverage *c, double seconds, uint64_t hist[COV_HIST_BUCKETS])
{
	memset(hist, 0, COV_HIST_BUCKETS * sizeof(hist[0]));
	for (uint64_t r = 0; r < c->n_regions; r++) {
		int b = (int)(coverage_of(c, r, seconds) * COV_HIST_BUCKETS);

		hist[b < 0 ? 0 : b >= COV_HIST_BUCKETS ? COV_HIST_BUCKETS - 1 : b]++;
	}
}
