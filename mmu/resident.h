/*
 * resident.h - which pages of a memory range hold data: the monitor's one scanner.
 */
#ifndef CCVM_RESIDENT_H
#define CCVM_RESIDENT_H

#include <stdint.h>

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
