/*
 * pagetable.c - the format of the guest's page tables.
 *
 * One PML4 entry covers 512 GiB, more than LAYOUT_MAX_RAM, so the shape is fixed:
 * PML4[0] -> PDPT -> one page directory per GiB, 2 MiB pages only. Each process's
 * tables sit in the system area of its own window of guest-physical memory
 * (mmu/aspace.c); the first process's, at LAYOUT_PGTABLE, map RAM to itself.
 * Which block an entry points at, and with what rights, is the caller's business:
 * this file only knows where the entries are.
 */
#include "pagetable.h"
#include "layout.h"
#include "../base/x86.h"

#include <errno.h>
#include <string.h>

#define PT_ENTRIES 512

static uint64_t *pt_page(uint8_t *host, uint64_t gpa)
{
	return (uint64_t *)(void *)(host + gpa);
}

/* Page directories for @size bytes of virtual space: one per GiB. */
static uint64_t pt_dirs(uint64_t size)
{
	return (size + GIB - 1) / GIB;
}

/* Empty tables for virtual [0, @size) at @base + LAYOUT_PGTABLE: PML4, PDPT, then the
 * page directories, every 2 MiB entry not present. 0 with *@cr3, or -EINVAL. */
static int pt_layout(uint8_t *host, uint64_t base, uint64_t size, uint64_t *cr3)
{
	const uint64_t pml4 = base + LAYOUT_PGTABLE, pdpt = pml4 + PAGE_SIZE;
	const uint64_t pd0 = pml4 + 2 * PAGE_SIZE;
	uint64_t n_pd = pt_dirs(size);

	if (!size || size % HUGE_SIZE || size > LAYOUT_MAX_RAM || base % HUGE_SIZE ||
	    n_pd + 2 > LAYOUT_PGTABLE_PAGES)
		return -EINVAL;
	memset(host + pml4, 0, (n_pd + 2) * PAGE_SIZE);
	pt_page(host, pml4)[0] = pdpt | PTE_P | PTE_RW | PTE_US;
	for (uint64_t i = 0; i < n_pd; i++)
		pt_page(host, pdpt)[i] = (pd0 + i * PAGE_SIZE) | PTE_P | PTE_RW | PTE_US;
	*cr3 = pml4;
	return 0;
}

void pt_write_table(uint8_t *host, uint64_t gpa, const uint64_t *entries, size_t n)
{
	uint64_t *t = pt_page(host, gpa);

	memcpy(t, entries, n * sizeof(*t));
	memset(t + n, 0, (PT_ENTRIES - n) * sizeof(*t));
}

uint64_t pt_link(uint64_t gpa)
{
	return gpa | PTE_P | PTE_RW | PTE_US;
}

/* The 2 MiB entry for @gva in the tables at @cr3 (pt_layout's) becomes @pde. */
static void pt_set(uint8_t *host, uint64_t cr3, uint64_t gva, uint64_t pde)
{
	uint64_t *pd = pt_page(host, cr3 + (2 + gva / GIB) * PAGE_SIZE);

	__atomic_store_n(&pd[(gva / HUGE_SIZE) % PT_ENTRIES], pde, __ATOMIC_RELEASE);
}

/* The system area is supervisor-only (CPL3 cannot reach the CPU tables or these very
 * tables); the stub area is user read+execute (the syscall stub runs at CPL3 on PVM
 * hosts); above, user memory. */
uint64_t pt_sys_entry(uint64_t gva)
{
	if (gva >= LAYOUT_STUB_AREA)
		return gva | PTE_P | PTE_PS | PTE_US;
	return gva | PTE_P | PTE_PS | PTE_RW;
}

int pt_build(uint8_t *sys, uint64_t ram_size, uint64_t *cr3)
{
	int rc = pt_layout(sys, 0, ram_size, cr3);

	if (rc)
		return rc;
	for (uint64_t gva = 0; gva < ram_size; gva += HUGE_SIZE)
		pt_set(sys, *cr3, gva,
		       gva >= LAYOUT_USER_BASE ? gva | PTE_P | PTE_PS | PTE_US | PTE_RW
					       : pt_sys_entry(gva));
	return 0;
}

int64_t pt_walk(const uint8_t *sys, uint64_t cr3, uint64_t gva, uint64_t *flags)
{
	const uint64_t perm = PTE_P | PTE_RW | PTE_US;
	const uint64_t home = cr3 / HUGE_SIZE; /* the 2 MiB block the tables live in */
	uint64_t acc = perm, e;
	const uint64_t *t;

	if (gva >> 48)
		return -1;
	t = (const uint64_t *)(const void *)(sys + cr3);
	e = t[(gva >> 39) & 511];
	acc &= e;
	if (!(e & PTE_P) || (e & PTE_ADDR_MASK) / HUGE_SIZE != home)
		return -1;
	t = (const uint64_t *)(const void *)(sys + (e & PTE_ADDR_MASK));
	e = t[(gva >> 30) & 511];
	acc &= e;
	if (!(e & PTE_P) || (e & PTE_ADDR_MASK) / HUGE_SIZE != home)
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
