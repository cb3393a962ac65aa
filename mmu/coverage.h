/*
 * coverage.h - per-region write coverage of guest memory (pure arithmetic, no KVM).
 */
#ifndef CCVM_COVERAGE_H
#define CCVM_COVERAGE_H

#include "../base/pages.h"

#include <stdbool.h>
#include <stdint.h>

#define COV_MIN_REGION (32ULL << 10)
#define COV_HIST_BUCKETS 10
#define COV_HYSTERESIS 0.10 /* a hot region stays hot down to threshold less this */

struct coverage {
	uint64_t ram_size;
	uint64_t region_size;   /* a power of two, at least 32 KiB */
	uint64_t n_regions;     /* the last one may be partial */
	float *hits;            /* per region: -ln(share unwritten), summed over observations */
	float *seconds;         /* per region: the time those observations lasted, summed */
	uint64_t windows;       /* windows folded in so far */
	uint64_t snapshots;     /* snapshots' own observations folded in so far */
};

/* What a snapshot saw of one region: of @pages present pages, @written were written
 * while it watched them; @exposure is how long it watched them, summed over the pages,
 * in units of the guest's progress (see coverage_add_snapshot). */
struct cov_obs {
	uint32_t written, pages;
	double exposure;
};

/* Returns 0, or -EINVAL for a region size that is not a power of two >= 32 KiB. */
int coverage_init(struct coverage *c, uint64_t ram_size, uint64_t region_size);
void coverage_fini(struct coverage *c);

/* Set bits among bits [first, first + n) of @bitmap. */
uint64_t coverage_count_bits(const uint64_t *bitmap, uint64_t first, uint64_t n);

/* Pages of RAM in region @r (less than a full region only at the end of RAM). */
uint64_t coverage_region_pages(const struct coverage *c, uint64_t r);

/* Fold one window in: @written has one bit per 4 KiB page of RAM, set when the page was
 * written during the window, in which the guest ran @seconds (> 0). @sampled (NULL:
 * every page) marks the pages the window watched; @written counts only among them, and
 * a region with none is left as it was. */
void coverage_add_window(struct coverage *c, const uint64_t *written, const uint64_t *sampled,
			 double seconds);

/* Fold in sampled pages, region by region: of @pages[r] pages, watched for @seconds[r]
 * summed over them, @written[r] were written while watched. A region folds once it
 * holds @min samples, and its counts are then zeroed; the others keep adding up.
 * Returns how many regions folded (a window is counted when any did). */
uint64_t coverage_add_samples(struct coverage *c, uint32_t *written, uint32_t *pages,
			      float *seconds, uint32_t min);

/* Fold in what a snapshot saw (@obs: one per region; a region with no pages is left as
 * it was); @per_second converts exposure to seconds of the guest's normal running. */
void coverage_add_snapshot(struct coverage *c, const struct cov_obs *obs, double per_second);

/* True once anything was folded in (before that, nothing is known). */
bool coverage_known(const struct coverage *c);

/* The share of region @r's pages expected to be written in @seconds. */
double coverage_of(const struct coverage *c, uint64_t r, double seconds);

/* A region is hot when its coverage over @seconds reaches @threshold; threshold 0
 * makes every region hot (CCoW-All). */
bool coverage_is_hot(const struct coverage *c, uint64_t r, double threshold, double seconds);

/* Classify every region for a snapshot taking @seconds: @hot holds the last
 * classification on entry (all 0 the first time) and the new one on return. A region
 * becomes hot at @threshold and stays hot while its coverage is at least
 * @threshold - COV_HYSTERESIS: estimates from short windows are noisy, and a region
 * near the threshold would otherwise flip between snapshots. Returns the hot count. */
uint64_t coverage_classify(const struct coverage *c, double threshold, double seconds,
			   uint8_t *hot);

/* Regions per decile [0,0.1) .. [0.9,1.0] of coverage over @seconds. */
void coverage_histogram(const struct coverage *c, double seconds, uint64_t hist[COV_HIST_BUCKETS]);

#endif
