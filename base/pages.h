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

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* @x rounded up to whole pages. */
static inline uint64_t page_up(uint64_t x)
{
	return (x + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1);
}

/* Fault [addr, addr + len) (page aligned) in for writing, its bytes unchanged; each
 * page touched where the kernel has no MADV_POPULATE_WRITE. 0 or -errno. */
static inline int pages_populate(void *addr, size_t len)
{
	if (madvise(addr, len, MADV_POPULATE_WRITE) == 0)
		return 0;
	if (errno != EINVAL)
		return -errno;
	for (size_t i = 0; i < len; i += PAGE_SIZE)
		__atomic_fetch_or((uint8_t *)addr + i, 0, __ATOMIC_RELAXED);
	return 0;
}

#endif
