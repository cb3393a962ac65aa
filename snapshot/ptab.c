/*
 * ptab.c - the engine's page tables (see ptab.h): allocated once, resident from the
 * start, and marked afresh in each snapshot's pause.
 *
 * The per-page tables (copy, pre_hash, state, pre, faulted and the three of write
 * tracking: 22 bytes per guest page) live in one mapping, backed by huge pages where
 * the host allows and touched at once: the pause and the fault path write them, and a
 * first touch there would cost a page fault each (more where the host backs memory
 * lazily, as on our nested machines).
 */
#include "ptab.h"
#include "../mmu/resident.h"
#include "../base/pages.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PTAB_BYTES_PER_PAGE (2 * sizeof(uint64_t) + 6)

int ptab_init(struct snap_ptab *t, uint64_t size)
{
	uint64_t pages = size / PAGE_SIZE;
	size_t len = (pages * PTAB_BYTES_PER_PAGE + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1);
	uint8_t *m;

	memset(t, 0, sizeof(*t));
	t->pages = pages;
	t->chunks = size / HUGE_SIZE;
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -ENOMEM;
	madvise(m, len, MADV_HUGEPAGE);
	for (size_t i = 0; i < len; i += PAGE_SIZE)
		((volatile uint8_t *)m)[i] = 0;
	t->tables = m;
	t->tables_len = len;
	t->copy = (void **)(void *)m;
	t->pre_hash = (uint64_t *)(void *)(m + pages * sizeof(uint64_t));
	t->state = m + pages * 2 * sizeof(uint64_t);
	t->pre = t->state + pages;
	t->faulted = t->pre + pages;
	t->dirty = t->faulted + pages;
	t->dirty_instant = t->dirty + pages;
	t->was_present = t->dirty_instant + pages;
	t->split = calloc(t->chunks ? t->chunks : 1, 1);
	t->chunk_saved_at = calloc(t->chunks ? t->chunks : 1, sizeof(uint64_t));
	return t->split && t->chunk_saved_at ? 0 : -ENOMEM;
}

void ptab_fini(struct snap_ptab *t)
{
	if (t->tables)
		munmap(t->tables, t->tables_len);
	free(t->split);
	free(t->chunk_saved_at);
	memset(t, 0, sizeof(*t));
}

static void ptab_mark_run(void *ctx, uint64_t first, uint64_t n)
{
	memset(((struct snap_ptab *)ctx)->state + first, PS_PROTECTED, n);
}

int ptab_mark(struct snap_ptab *t, uint8_t *host)
{
	memset(t->faulted, 0, t->pages);
	memset(t->state, PS_ZERO, t->pages);
	return resident_scan(host, t->pages * PAGE_SIZE, ptab_mark_run, t);
}

/* Unprotecting single pages split the huge pages that back guest RAM; put them back
 * together once the snapshot is done, or the guest runs slower (TLB misses) and the
 * next snapshot's write protection takes ten times longer. */
void ptab_collapse_split(struct snap_ptab *t, struct gmem *mem)
{
	for (uint64_t c = 0; c < t->chunks; c++) {
		if (!t->split[c])
			continue;
		t->split[c] = 0;
		gmem_collapse(mem, c * HUGE_SIZE, HUGE_SIZE);
	}
}
