/*
 * resident.c - which pages of a memory range hold data (see resident.h).
 *
 * The snapshot engine marks the pages it must save with it, and the coverage tracker
 * the pages it watches. PAGEMAP_SCAN answers a range at a time; mincore, the fallback,
 * a byte per page.
 */
#include "resident.h"
#include "../base/pages.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define RES_PAGE_IS_PRESENT (1ULL << 3)
#define RES_PAGE_IS_SWAPPED (1ULL << 4)
#define RES_REGIONS 4096 /* runs per ioctl: fragmented memory still takes few calls */

static int resident_pagemap(const uint8_t *base, uint64_t size, resident_fn fn, void *ctx)
{
	struct res_page_region *r = malloc(RES_REGIONS * sizeof(*r));
	uint64_t start = (uint64_t)(uintptr_t)base, at = start, end = start + size;
	int fd, rc = 0;

	if (!r)
		return -ENOMEM;
	fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(r);
		return -errno;
	}
	while (at < end) {
		struct res_pm_scan_arg a = {
			.size = sizeof(a), .start = at, .end = end, .vec = (uint64_t)(uintptr_t)r,
			.vec_len = RES_REGIONS,
			.category_anyof_mask = RES_PAGE_IS_PRESENT | RES_PAGE_IS_SWAPPED,
			.return_mask = RES_PAGE_IS_PRESENT | RES_PAGE_IS_SWAPPED,
		};
		long n = ioctl(fd, RES_PAGEMAP_SCAN, &a);

		if (n < 0) {
			rc = -errno;
			break;
		}
		for (long i = 0; i < n; i++)
			fn(ctx, (r[i].start - start) / PAGE_SIZE, (r[i].end - r[i].start) / PAGE_SIZE);
		if (a.walk_end <= at)
			break;
		at = a.walk_end;
	}
	close(fd);
	free(r);
	return rc;
}

static int resident_mincore(const uint8_t *base, uint64_t size, resident_fn fn, void *ctx)
{
	uint64_t pages = size / PAGE_SIZE, run = 0;
	unsigned char *vec = malloc(pages);

	if (!vec)
		return -ENOMEM;
	if (mincore((void *)(uintptr_t)base, size, vec) < 0) {
		int rc = -errno;

		free(vec);
		return rc;
	}
	for (uint64_t p = 0; p <= pages; p++) {
		if (p < pages && (vec[p] & 1))
			continue;
		if (p > run)
			fn(ctx, run, p - run);
		run = p + 1;
	}
	free(vec);
	return 0;
}

int resident_scan(const uint8_t *base, uint64_t size, resident_fn fn, void *ctx)
{
	/* A scan that fails part way reported nothing wrong: the fallback covers the
	 * whole range again, and callers' marks are idempotent. */
	if (resident_pagemap(base, size, fn, ctx) == 0)
		return 0;
	return resident_mincore(base, size, fn, ctx);
}
