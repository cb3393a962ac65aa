/*
 * pagetable.c - build the guest's page tables.
 *
 * The tables never change while the guest runs: mmap and brk only hand out ranges of
 * RAM that are already mapped, so the guest never needs a TLB flush and the monitor
 * never touches CR3 again. One PML4 entry covers 512 GiB, more than LAYOUT_MAX_RAM,
 * so the shape is fixed: PML4[0] -> PDPT -> one page directory per GiB.
 */
#include "pagetable.h"
#include "layout.h"
#include "../vmm/base/x86.h"

#include <errno.h>
#include <string.h>

#define PT_ENTRIES 512

static uint64_t *pt_page(uint8_t *sys, uint64_t gpa)
{
	return (uint64_t *)(void *)(sys + gpa);
}

int pt_build(uint8_t *sys, uint64_t ram_size, uint64_t *cr3)
{
	const uint64_t pml4 = LAYOUT_PGTABLE, pdpt = LAYOUT_PGTABLE + PAGE_SIZE;
	const uint64_t pd0 = LAYOUT_PGTABLE + 2 * PAGE_SIZE;
	uint64_t n_pd = (ram_size + GIB - 1) / GIB;
	uint64_t gpa;

	if (!ram_size || ram_size % HUGE_SIZE || ram_size > LAYOUT_MAX_RAM ||
	    n_pd + 2 > LAYOUT_PGTABLE_PAGES)
		return -EINVAL;
	memset(sys + LAYOUT_PGTABLE, 0, (n_pd + 2) * PAGE_SIZE);
	pt_page(sys, pml4)[0] = pdpt | PTE_P | PTE_RW | PTE_US;
	for (uint64_t i = 0; i < n_pd; i++)
		pt_page(sys, pdpt)[i] = (pd0 + i * PAGE_SIZE) | PTE_P | PTE_RW | PTE_US;
	for (gpa = 0; gpa < ram_size; gpa += HUGE_SIZE) {
		uint64_t *pd = pt_page(sys, pd0 + (gpa / GIB) * PAGE_SIZE);
		uint64_t flags = PTE_P | PTE_PS;

		/* The system area is supervisor-only (CPL3 cannot reach the CPU tables or
		 * these very tables); the stub area is user read+execute (the syscall stub
		 * runs at CPL3 on PVM hosts); user RAM is user read/write. */
		if (gpa >= LAYOUT_USER_BASE)
			flags |= PTE_US | PTE_RW;
		else if (gpa >= LAYOUT_STUB_AREA)
			flags |= PTE_US;
		else
			flags |= PTE_RW;
		pd[(gpa / HUGE_SIZE) % PT_ENTRIES] = gpa | flags;
	}
	*cr3 = pml4;
	return 0;
}

int64_t pt_walk(const uint8_t *sys, uint64_t cr3, uint64_t gva, uint64_t *flags)
{
	const uint64_t perm = PTE_P | PTE_RW | PTE_US;
	uint64_t acc = perm, e;
	const uint64_t *t;

	if (gva >> 48)
		return -1;
	t = (const uint64_t *)(const void *)(sys + cr3);
	e = t[(gva >> 39) & 511];
	acc &= e;
	if (!(e & PTE_P) || (e & PTE_ADDR_MASK) >= LAYOUT_SYS_END)
		return -1;
	t = (const uint64_t *)(const void *)(sys + (e & PTE_ADDR_MASK));
	e = t[(gva >> 30) & 511];
	acc &= e;
	if (!(e & PTE_P) || (e & PTE_ADDR_MASK) >= LAYOUT_SYS_END)
		return -1;
	t = (const uint64_t *)(const void *)(sys + (e & PTE_ADDR_MASK));
	e = t[(gva >> 21) & 511];
	acc &= e;
	if (!(e & PTE_P) || !(e & PTE_PS))
		return -1;
	if (flags)
		*flags = acc & perm;
	return (int64_t)((e & PTE_ADDR_MASK & ~(HUGE_SIZE - 1)) | (gva & (HUGE_SIZE - 1)));
}
