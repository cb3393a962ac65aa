/*
 * coverage.h - per-region write coverage of guest memory (pure arithmetic, no KVM).
 */
#ifndef CCVM_COVERAGE_H
#define CCVM_COVERAGE_H

#include <stdbool.h>
#include <stdint.h>

#define COV_MIN_REGION (32ULL << 10)
#define COV_PAGE       4096ULL
#define COV_HIST_BUCKETS 10

struct coverage {
	uint64_t ram_size;
	uint64_t region_size;   /* a power of two, at least 32 KiB */
	uint64_t n_regions;     /* the last one may be partial */
	float *rate;            /* per region: smoothed write rate, -ln(share unwritten) per s */
	uint64_t windows;       /* windows folded in so far */
};

/* Returns 0, or -EINVAL for a region size that is not a power of two >= 32 KiB. */
int coverage_init(struct coverage *c, uint64_t ram_size, uint64_t region_size);
void coverage_fini(struct coverage *c);

/* Set bits among bits [first, first + n) of @bitmap. */
uint64_t coverage_count_bits(const uint64_t *bitmap, uint64_t first, uint64_t n);

/* Pages of RAM in region @r (less than a full region only at the end of RAM). */
uint64_t coverage_region_pages(const struct coverage *c, uint64_t r);

/* Fold one window in: @bitmap has one bit per 4 KiB page of RAM, set when the page was
 * written during the window, in which the guest ran @seconds (> 0). */
void coverage_add_window(struct coverage *c, const uint64_t *bitmap, double seconds);

/* The share of region @r's pages expected to be written in @seconds. */
double coverage_of(const struct coverage *c, uint64_t r, double seconds);

/* A region is hot when its coverage over @seconds reaches @threshold; threshold 0
 * makes every region hot (CCoW-All). */
bool coverage_is_hot(const struct coverage *c, uint64_t r, double threshold, double seconds);

/* Regions per decile [0,0.1) .. [0.9,1.0] of coverage over @seconds. */
void coverage_histogram(const struct coverage *c, double seconds, uint64_t hist[COV_HIST_BUCKETS]);

#endif
