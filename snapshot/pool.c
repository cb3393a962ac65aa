/*
 * pool.c - the copy buffers of copy-on-write snapshots.
 *
 * A fault handler must neither call the allocator nor touch memory for the first
 * time: a first touch costs a page fault and zeroing (~11 us per 4 KiB page, ~0.5
 * GB/s measured here even with MADV_POPULATE_WRITE), as much as the copy it serves.
 * So the pool is one reservation, address space only, of which a prefix of slots is
 * faulted in by pool_grow from a background thread (or while the VM is paused) and
 * kept between snapshots; only that prefix is ever handed out. The engine sizes it
 * from what the next snapshot will need and gives it back when snapshots stop.
 *
 * A slot is one CCoW region: a region copy is one memcpy into one slot, taken with
 * one lock acquisition, and its pages go back one by one as the writer saves them
 * (the slot is free once all have). Single-page copies come from slots cut into
 * pages. LIFO stacks keep recently used, cache-warm memory in use.
 */
#include "pool.h"
#include "../base/pages.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { POOL_SLOT_FREE = 0, POOL_SLOT_REGION, POOL_SLOT_PAGES, POOL_SLOT_ARENA };

static size_t pool_per_slot(const struct pool *p)
{
	return p->slot_size / PAGE_SIZE;
}

int pool_init(struct pool *p, size_t bytes, size_t slot_size)
{
	size_t align = slot_size > HUGE_SIZE ? slot_size : HUGE_SIZE, len;
	uint8_t *raw;

	memset(p, 0, sizeof(*p));
	if (slot_size < PAGE_SIZE || (slot_size & (slot_size - 1)) || bytes < slot_size)
		return -EINVAL;
	p->slot_size = slot_size;
	p->n_slots = bytes / slot_size;
	p->limit = p->n_slots;
	len = p->n_slots * slot_size;
	/* Aligned to a huge page, so slots can be backed by huge pages. */
	raw = mmap(NULL, len + align, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (raw == MAP_FAILED)
		return -errno;
	p->base = (uint8_t *)(((uintptr_t)raw + align - 1) & ~((uintptr_t)align - 1));
	if (p->base > raw)
		munmap(raw, (size_t)(p->base - raw));
	munmap(p->base + len, (size_t)(raw + align - p->base));
	madvise(p->base, len, MADV_HUGEPAGE);
	p->free_slots = calloc(p->n_slots, sizeof(uint32_t));
	p->kind = calloc(p->n_slots, 1);
	p->left = calloc(p->n_slots, sizeof(uint32_t));
	p->free_pages = calloc(p->n_slots * pool_per_slot(p), sizeof(uint32_t));
	if (!p->free_slots || !p->kind || !p->left || !p->free_pages) {
		pool_fini(p);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->grow_lock, NULL);
	return 0;
}

void pool_fini(struct pool *p)
{
	if (p->base) {
		munmap(p->base, p->n_slots * p->slot_size);
		pthread_mutex_destroy(&p->lock);
		pthread_mutex_destroy(&p->grow_lock);
	}
	free(p->free_slots);
	free(p->kind);
	free(p->left);
	free(p->free_pages);
	memset(p, 0, sizeof(*p));
}

/* Fault in [off, off + len) of the pool. */
static int pool_populate(struct pool *p, size_t off, size_t len)
{
	return pages_populate(p->base + off, len);
}

/* Faulted in this much at a time: populating holds the mmap lock, and a thread that
 * needs it for writing (a huge page collapse) would stop page faults behind it. */
#define POOL_POPULATE_STEP (4ULL << 20)

int pool_grow(struct pool *p, size_t slots)
{
	size_t step = POOL_POPULATE_STEP / p->slot_size ? POOL_POPULATE_STEP / p->slot_size : 1;
	int rc = 0;

	pthread_mutex_lock(&p->grow_lock);
	if (slots > p->limit)
		slots = p->limit;
	while (!rc && p->ready < slots) {
		size_t from = p->ready, to = from + step < slots ? from + step : slots;

		rc = pool_populate(p, from * p->slot_size, (to - from) * p->slot_size);
		if (rc)
			break;
		pthread_mutex_lock(&p->lock);
		/* Pushed under the free ones: the stack hands out the oldest first. */
		memmove(p->free_slots + (to - from), p->free_slots, p->n_free_slots * sizeof(uint32_t));
		for (size_t s = from; s < to; s++)
			p->free_slots[s - from] = (uint32_t)s;
		p->n_free_slots += to - from;
		__atomic_store_n(&p->ready, to, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&p->lock);
	}
	pthread_mutex_unlock(&p->grow_lock);
	return rc;
}

/* With p->lock held and nothing in use: ready slots [0, slots) free, the rest gone. */
static void pool_rebuild(struct pool *p, size_t slots)
{
	p->n_free_pages = 0;
	p->n_free_slots = 0;
	for (size_t s = slots; s-- > 0;) {
		p->kind[s] = POOL_SLOT_FREE;
		p->free_slots[p->n_free_slots++] = (uint32_t)s;
	}
	p->ready = slots;
}

void pool_reset(struct pool *p)
{
	pthread_mutex_lock(&p->lock);
	if (!p->in_use)
		pool_rebuild(p, p->ready);
	pthread_mutex_unlock(&p->lock);
}

void pool_shrink(struct pool *p, size_t slots)
{
	pthread_mutex_lock(&p->grow_lock);
	pthread_mutex_lock(&p->lock);
	if (slots > p->limit)
		slots = p->limit;
	if (!p->in_use && slots < p->ready) {
		madvise(p->base + slots * p->slot_size, (p->ready - slots) * p->slot_size,
			MADV_DONTNEED);
		pool_rebuild(p, slots);
	}
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_unlock(&p->grow_lock);
}

void pool_set_limit(struct pool *p, size_t slots)
{
	size_t ready;

	pthread_mutex_lock(&p->grow_lock);
	p->limit = slots < p->n_slots ? slots : p->n_slots;
	ready = p->ready;
	pthread_mutex_unlock(&p->grow_lock);
	if (ready > p->limit)
		pool_shrink(p, p->limit);
}

size_t pool_limit(const struct pool *p)
{
	return __atomic_load_n(&p->limit, __ATOMIC_RELAXED);
}

uint64_t pool_cap_pages(const struct pool *p)
{
	return (uint64_t)pool_limit(p) * pool_per_slot(p);
}

/* With p->lock held: @bytes more in use, of which @raw hold copies as they are. */
static void pool_count(struct pool *p, size_t bytes, size_t raw)
{
	p->in_use += bytes;
	if (p->in_use > p->in_use_peak)
		p->in_use_peak = p->in_use;
	p->raw += raw;
	if (p->raw > p->raw_peak)
		p->raw_peak = p->raw;
}

void *pool_get_page(struct pool *p)
{
	void *buf = NULL;

	pthread_mutex_lock(&p->lock);
	if (!p->n_free_pages && p->n_free_slots) { /* cut a slot into pages */
		uint32_t s = p->free_slots[--p->n_free_slots];

		p->kind[s] = POOL_SLOT_PAGES;
		for (size_t i = pool_per_slot(p); i-- > 0;)
			p->free_pages[p->n_free_pages++] = (uint32_t)(s * pool_per_slot(p) + i);
	}
	if (p->n_free_pages) {
		buf = p->base + (size_t)p->free_pages[--p->n_free_pages] * PAGE_SIZE;
		pool_count(p, PAGE_SIZE, PAGE_SIZE);
	}
	pthread_mutex_unlock(&p->lock);
	return buf;
}

/* A whole free slot of @kind, or NULL unless more than @reserve are free. */
static void *pool_take_slot(struct pool *p, size_t reserve, uint8_t kind)
{
	void *slot = NULL;

	pthread_mutex_lock(&p->lock);
	if (p->n_free_slots > reserve) {
		uint32_t s = p->free_slots[--p->n_free_slots];

		p->kind[s] = kind;
		p->left[s] = (uint32_t)pool_per_slot(p);
		slot = p->base + (size_t)s * p->slot_size;
		pool_count(p, p->slot_size, kind == POOL_SLOT_ARENA ? 0 : p->slot_size);
	}
	pthread_mutex_unlock(&p->lock);
	return slot;
}

void *pool_get_slot(struct pool *p, size_t reserve)
{
	return pool_take_slot(p, reserve, POOL_SLOT_REGION);
}

void *pool_get_arena(struct pool *p, size_t reserve)
{
	return pool_take_slot(p, reserve, POOL_SLOT_ARENA);
}

/* With p->lock held: @n pages of region or arena slot @s are back. */
static void pool_region_back(struct pool *p, size_t s, size_t n)
{
	p->left[s] -= (uint32_t)n;
	p->in_use -= n * PAGE_SIZE;
	if (p->kind[s] != POOL_SLOT_ARENA)
		p->raw -= n * PAGE_SIZE;
	if (!p->left[s]) {
		p->kind[s] = POOL_SLOT_FREE;
		p->free_slots[p->n_free_slots++] = (uint32_t)s;
	}
}

void pool_unused(struct pool *p, void *slot, size_t pages)
{
	if (!pages)
		return;
	pthread_mutex_lock(&p->lock);
	pool_region_back(p, (size_t)((uint8_t *)slot - p->base) / p->slot_size, pages);
	pthread_mutex_unlock(&p->lock);
}

void pool_put(struct pool *p, void *page)
{
	size_t off = (size_t)((uint8_t *)page - p->base), s = off / p->slot_size;

	pthread_mutex_lock(&p->lock);
	if (p->kind[s] == POOL_SLOT_REGION) {
		pool_region_back(p, s, 1);
	} else {
		p->free_pages[p->n_free_pages++] = (uint32_t)(off / PAGE_SIZE);
		p->in_use -= PAGE_SIZE;
		p->raw -= PAGE_SIZE;
	}
	pthread_mutex_unlock(&p->lock);
}

void pool_arena_back(struct pool *p, void *arena, size_t pages)
{
	pool_unused(p, arena, pages);
}

void *pool_region_of(struct pool *p, const void *page, size_t n)
{
	size_t s = (size_t)((const uint8_t *)page - p->base) / p->slot_size;
	void *slot = NULL;

	pthread_mutex_lock(&p->lock);
	if (p->kind[s] == POOL_SLOT_REGION && p->left[s] == n)
		slot = p->base + s * p->slot_size;
	pthread_mutex_unlock(&p->lock);
	return slot;
}

void pool_region_to_arena(struct pool *p, void *slot, size_t keep)
{
	size_t s = (size_t)((uint8_t *)slot - p->base) / p->slot_size;

	pthread_mutex_lock(&p->lock);
	p->raw -= (size_t)p->left[s] * PAGE_SIZE;
	p->in_use -= (size_t)p->left[s] * PAGE_SIZE;
	p->kind[s] = POOL_SLOT_ARENA;
	p->left[s] = 0;
	if (keep) {
		p->left[s] = (uint32_t)keep;
		pool_count(p, keep * PAGE_SIZE, 0);
	} else {
		pool_region_back(p, s, 0); /* free again */
	}
	pthread_mutex_unlock(&p->lock);
}

void pool_count_packed(struct pool *p, long pages)
{
	pthread_mutex_lock(&p->lock);
	if (pages >= 0)
		pool_count(p, 0, (size_t)pages * PAGE_SIZE);
	else
		p->raw -= (size_t)-pages * PAGE_SIZE;
	pthread_mutex_unlock(&p->lock);
}

/* A counter of the pool, read under its lock. */
static size_t pool_read(struct pool *p, const size_t *counter)
{
	size_t n;

	pthread_mutex_lock(&p->lock);
	n = *counter;
	pthread_mutex_unlock(&p->lock);
	return n;
}

/* The mark @peak, reset to what @now is: the most since the last call. */
static size_t pool_take_mark(struct pool *p, size_t *peak, const size_t *now)
{
	size_t n;

	pthread_mutex_lock(&p->lock);
	n = *peak;
	*peak = *now;
	pthread_mutex_unlock(&p->lock);
	return n;
}

size_t pool_in_use(struct pool *p)
{
	return pool_read(p, &p->in_use);
}

size_t pool_ready_bytes(struct pool *p)
{
	return __atomic_load_n(&p->ready, __ATOMIC_ACQUIRE) * p->slot_size;
}

size_t pool_free_slots(struct pool *p)
{
	return pool_read(p, &p->n_free_slots);
}

size_t pool_free_pages(struct pool *p)
{
	size_t n;

	pthread_mutex_lock(&p->lock);
	n = p->n_free_pages + p->n_free_slots * pool_per_slot(p);
	pthread_mutex_unlock(&p->lock);
	return n;
}

#define POOL_MINCORE_STEP (64ULL << 20) /* bytes looked at per mincore call */

size_t pool_resident_bytes(struct pool *p)
{
	static unsigned char vec[POOL_MINCORE_STEP / PAGE_SIZE];
	static pthread_mutex_t vec_lock = PTHREAD_MUTEX_INITIALIZER;
	size_t len = p->n_slots * p->slot_size, n = 0;

	pthread_mutex_lock(&vec_lock);
	for (size_t off = 0; off < len; off += POOL_MINCORE_STEP) {
		size_t step = len - off < POOL_MINCORE_STEP ? len - off : POOL_MINCORE_STEP;

		if (mincore(p->base + off, step, vec) < 0)
			break;
		for (size_t i = 0; i < step / PAGE_SIZE; i++)
			n += vec[i] & 1;
	}
	pthread_mutex_unlock(&vec_lock);
	return n * PAGE_SIZE;
}

size_t pool_take_peak(struct pool *p)
{
	return pool_take_mark(p, &p->in_use_peak, &p->in_use);
}

size_t pool_raw(struct pool *p)
{
	return pool_read(p, &p->raw);
}

size_t pool_take_raw_peak(struct pool *p)
{
	return pool_take_mark(p, &p->raw_peak, &p->raw);
}
