/*
 * pagetable.h - the guest page tables ccvm builds once at start.
 */
#ifndef CCVM_PAGETABLE_H
#define CCVM_PAGETABLE_H

#include <stdint.h>

/*
 * pt_build - write 4-level page tables that identity-map [0, ram_size) with 2 MiB
 * pages into the system area at LAYOUT_PGTABLE.
 * @sys:      host pointer to guest-physical 0 (the system area, LAYOUT_SYS_END bytes)
 * @ram_size: multiple of 2 MiB, at most LAYOUT_MAX_RAM
 * @cr3:      gets the guest-physical address of the PML4
 *
 * The system area is supervisor-only, the stub area user read-only (executable),
 * the rest user read/write. Returns 0 or -EINVAL.
 */
int pt_build(uint8_t *sys, uint64_t ram_size, uint64_t *cr3);

/*
 * pt_walk - translate a guest virtual address through tables pt_build wrote.
 * Returns the guest-physical address, or -1 when not mapped. *flags gets the
 * AND of the P/RW/US bits along the walk.
 */
int64_t pt_walk(const uint8_t *sys, uint64_t cr3, uint64_t gva, uint64_t *flags);

#endif
