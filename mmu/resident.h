/*
 * resident.h - which pages of a memory range hold data: the monitor's one scanner.
 */
#ifndef CCVM_RESIDENT_H
#define CCVM_RESIDENT_H

#include <stdint.h>
#include <sys/ioctl.h>

/* The PAGEMAP_SCAN ABI (Linux 6.7), defined here because our build headers predate
 * it; it is fixed. The request number is public so that the seccomp filter matches
 * it whole (vmm/confine_seccomp.c). */
struct res_page_region {
	uint64_t start, end, categories;
};

struct res_pm_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};

#define RES_PAGEMAP_SCAN _IOWR('f', 16, struct res_pm_scan_arg)

/* Called for each run of resident pages: pages [first, first + n) of the range. */
typedef void (*resident_fn)(void *ctx, uint64_t first, uint64_t n);

/*
 * resident_scan - call @fn for every run of pages of [base, base + size) that are
 * present or swapped out (both hold data a snapshot must save). PAGEMAP_SCAN
 * (Linux 6.7) reports runs; older kernels fall back to mincore (a byte per page, and
 * blind to swapped-out pages). @base and @size are page aligned. Returns 0 or -errno;
 * on error @fn may have been called for part of the range.
 */
int resident_scan(const uint8_t *base, uint64_t size, resident_fn fn, void *ctx);

#endif
