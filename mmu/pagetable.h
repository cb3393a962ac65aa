/*
 * pagetable.h - the format of the guest page tables (mmu/pagetable.c).
 */
#ifndef CCVM_PAGETABLE_H
#define CCVM_PAGETABLE_H

#include <stddef.h>
#include <stdint.h>

/*
 * pt_build - write 4-level page tables that identity-map [0, ram_size) with 2 MiB
 * pages into the system area at LAYOUT_PGTABLE.
 * @sys:      host pointer to guest-physical 0 (the system area, LAYOUT_SYS_END bytes)
 * @ram_size: multiple of 2 MiB, at most LAYOUT_MAX_RAM
 * @cr3:      gets the guest-physical address of the PML4
 *
 * The system area is supervisor-only, the stub area user read-only (executable),
 * the rest user read/write. Returns 0 or -EINVAL. The VM's tables are mmu/aspace.c's;
 * a one-process VM's are byte for byte these (the unit tests compare them).
 */
int pt_build(uint8_t *sys, uint64_t ram_size, uint64_t *cr3);

/* The page at guest-physical @gpa becomes a table of @n entries from @entries, the rest
 * not present. */
void pt_write_table(uint8_t *host, uint64_t gpa, const uint64_t *entries, size_t n);
/* An upper-level entry pointing at the table at @gpa. */
uint64_t pt_link(uint64_t gpa);

/* The entry every process has for @gva below LAYOUT_USER_BASE: the first window's
 * system area (supervisor-only) and stub area (user read-only), mapped to themselves. */
uint64_t pt_sys_entry(uint64_t gva);

/*
 * pt_walk - translate a guest virtual address through tables pt_build or
 * mmu/aspace.c wrote.
 * Returns the guest-physical address, or -1 when not mapped (or when an entry leads
 * out of the 2 MiB block the PML4 is in). *flags gets the AND of the P/RW/US bits
 * along the walk.
 */
int64_t pt_walk(const uint8_t *sys, uint64_t cr3, uint64_t gva, uint64_t *flags);

#endif
