/*
 * coverage.c - how much of each region the guest writes.
 *
 * The CCoW idea rests on one number per region: the share of its 4 KiB pages written
 * within a window about as long as a snapshot. A region whose share reaches the
 * threshold is hot: on its first write fault during a snapshot, copying the whole
 * region costs one trap instead of hundreds. The dirty-page bitmaps come from KVM's
 * dirty log (dirty.c); this file only does the arithmetic, so it can be tested without
 * KVM. Coverage is smoothed over windows (exponential, weight 1/2) so a single odd
 * window does not flip a region.
 */
#include "coverage.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define COV_WEIGHT 0.5f

int coverage_init(struct coverage *c, uint64_t ram_size, uint64_t region_size)
{
	memset(c, 0, sizeof(*c));
	if (region_size < COV_MIN_REGION || (region_size & (region_size - 1)) || !ram_size ||
	    ram_size % COV_PAGE)
		return -EINVAL;
	c->ram_size = ram_size;
	c->region_size = region_size;
	c->n_regions = (ram_size + region_size - 1) / region_size;
	c->cov = calloc(c->n_regions, sizeof(float));
	return c->cov ? 0 : -ENOMEM;
}

void coverage_fini(struct coverage *c)
{
	free(c->cov);
	memset(c, 0, sizeof(*c));
}

uint64_t coverage_region_pages(const struct coverage *c, uint64_t r)
{
	uint64_t start = r * c->region_size, end = start + c->region_size;

	if (r >= c->n_regions)
		return 0;
	if (end > c->ram_size)
		end = c->ram_size;
	return (end - start) / COV_PAGE;
}

/* Set bits among pages [first, first + n) of the bitmap. */
static uint64_t count_bits(const uint64_t *bitmap, uint64_t first, uint64_t n)
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

void coverage_add_window(struct coverage *c, const uint64_t *bitmap)
{
	uint64_t per = c->region_size / COV_PAGE;

	for (uint64_t r = 0; r < c->n_regions; r++) {
		uint64_t pages = coverage_region_pages(c, r);
		float now = (float)count_bits(bitmap, r * per, pages) / (float)pages;

		c->cov[r] = c->windows ? COV_WEIGHT * now + (1.0f - COV_WEIGHT) * c->cov[r] : now;
	}
	c->windows++;
}

bool coverage_is_hot(const struct coverage *c, uint64_t r, double threshold)
{
	if (r >= c->n_regions)
		return false;
	return threshold <= 0 || (double)c->cov[r] >= threshold - 1e-6;
}

void coverage_histogram(const struct coverage *c, uint64_t hist[COV_HIST_BUCKETS])
{
	memset(hist, 0, COV_HIST_BUCKETS * sizeof(hist[0]));
	for (uint64_t r = 0; r < c->n_regions; r++) {
		int b = (int)(c->cov[r] * COV_HIST_BUCKETS);

		hist[b < 0 ? 0 : b >= COV_HIST_BUCKETS ? COV_HIST_BUCKETS - 1 : b]++;
	}
}
