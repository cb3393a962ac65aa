/*
 * vma.h - the guest's memory map: which page ranges of user RAM are in use, and for what.
 */
#ifndef CCVM_VMA_H
#define CCVM_VMA_H

#include <stdbool.h>
#include <stdint.h>

/* VMA_SHM: a shared mapping (MAP_SHARED anonymous or of a memfd), whose bytes every
 * process mapping it holds (gmem_alias); its file_id and file_off as VMA_FILE's. */
enum vma_kind { VMA_ANON, VMA_FILE, VMA_PROGRAM, VMA_BRK, VMA_STACK, VMA_VDSO, VMA_SHM };

/* A kind with a file behind it: file_id and file_off mean something. */
#define VMA_HAS_FILE(k) ((k) == VMA_FILE || (k) == VMA_SHM)

struct vma {
	uint64_t start, end;  /* page aligned, end exclusive */
	uint32_t prot;        /* PROT_* as the guest asked (not enforced by the page tables) */
	uint32_t flags;       /* MAP_* as the guest asked */
	enum vma_kind kind;
	int file_id;          /* VMA_FILE, VMA_SHM: index in the personality's mapped-file list */
	uint64_t file_off;    /* VMA_FILE, VMA_SHM: file offset of start */
};

struct vma_map {
	struct vma *v;        /* sorted by start, never overlapping */
	int n, cap;
	uint64_t lo, hi;      /* the range the allocator hands out */
};

void vma_map_init(struct vma_map *m, uint64_t lo, uint64_t hi);
void vma_map_free(struct vma_map *m);
/* @dst (uninitialised) becomes a copy of @src: 0 or -ENOMEM (@dst then empty). */
int vma_map_copy(struct vma_map *dst, const struct vma_map *src);

/* Record [start, end) as @proto (its start/end are ignored), replacing whatever was
 * there. Returns 0 or -ENOMEM. */
int vma_insert(struct vma_map *m, uint64_t start, uint64_t end, const struct vma *proto);

/* Forget [start, end): mappings that straddle an edge are split. Returns 0 or -ENOMEM. */
int vma_remove(struct vma_map *m, uint64_t start, uint64_t end);

/* The index of the first mapping that ends after @addr (m->n when none): where a walk
 * over the mappings meeting a range starting at @addr begins. */
int vma_index_at(const struct vma_map *m, uint64_t addr);

/* The mapping that contains @addr, or NULL. */
struct vma *vma_find(struct vma_map *m, uint64_t addr);

/* True when no mapping intersects [start, end). */
bool vma_range_free(const struct vma_map *m, uint64_t start, uint64_t end);

/* True when [start, end) is entirely covered by mappings. */
bool vma_range_mapped(const struct vma_map *m, uint64_t start, uint64_t end);

/* Highest free [addr, addr + len) inside [m->lo, below) aligned to @align, the way
 * Linux hands out mmap addresses top-down. Returns 0 or -ENOMEM. */
int vma_find_free(const struct vma_map *m, uint64_t len, uint64_t below, uint64_t align,
		  uint64_t *addr);

/* Lowest mapping start >= @addr, or m->hi when none. */
uint64_t vma_next_start(const struct vma_map *m, uint64_t addr);

/* Bit b of @bits set for each block [b * @block, (b + 1) * @block), b < @n, that a
 * mapping touches (what a fork shares); @bits has room for @n bits, and is cleared
 * first. */
void vma_map_blocks(const struct vma_map *m, uint64_t block, uint64_t *bits, uint32_t n);
/* The same for the mappings of kind @kind only. */
void vma_map_blocks_of(const struct vma_map *m, enum vma_kind kind, uint64_t block, uint64_t *bits,
		       uint32_t n);

#endif
