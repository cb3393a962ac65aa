/*
 * pages.h - the page sizes every layer works in: the x86-64 base page, and the 2 MiB
 * huge page that guest RAM is mapped with (by the guest page tables and, with THP, by
 * the host). Image chunks, coverage regions and the page pool are counted in these.
 */
#ifndef CCVM_PAGES_H
#define CCVM_PAGES_H

#define PAGE_SHIFT 12
#define PAGE_SIZE  (1ULL << PAGE_SHIFT)  /* 4 KiB */
#define HUGE_SIZE  (2ULL << 20)          /* 2 MiB */

#include <stdint.h>

/* @x rounded up to whole pages. */
static inline uint64_t page_up(uint64_t x)
{
	return (x + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1);
}

#endif
