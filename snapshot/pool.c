/*
 * pool.c - the page pool for copy-on-write copies.
 *
 * A fault handler must not call the allocator. The pool is one THP-backed mapping,
 * reserved at start and reused by every snapshot, never returned in between. It is
 * not touched in advance: its pages become resident as copies first need them (one
 * huge-page fault per 512 buffers, as buffers are handed out in address order at
 * first), so the host's RSS shows the most copies any snapshot needed, which is the
 * memory CCoW costs, rather than the pool's size. A LIFO of free buffers keeps
 * recently used (cache-warm, resident) pages in use.
 */
#include "pool.h"
#include "../mmu/pages.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>


int pool_init(struct pool *p, size_t bytes)
{
	memset(p, 0, sizeof(*p));
	p->n_pages = bytes / PAGE_SIZE;
	if (!p->n_pages)
		return -EINVAL;
	p->base = mmap(NULL, p->n_pages * PAGE_SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->base == MAP_FAILED) {
		p->base = NULL;
		return -errno;
	}
	madvise(p->base, p->n_pages * PAGE_SIZE, MADV_HUGEPAGE);
	p->free = malloc(p->n_pages * sizeof(uint32_t));
	if (!p->free) {
		munmap(p->base, p->n_pages * PAGE_SIZE);
		p->base = NULL;
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->n_pages; i++)
		p->free[i] = (uint32_t)(p->n_pages - 1 - i);
	p->n_free = p->n_pages;
	pthread_mutex_init(&p->lock, NULL);
	return 0;
}

void pool_fini(struct pool *p)
{
	if (p->base) {
		munmap(p->base, p->n_pages * PAGE_SIZE);
		pthread_mutex_destroy(&p->lock);
	}
	free(p->free);
	memset(p, 0, sizeof(*p));
}

void *pool_get(struct pool *p)
{
	void *buf = NULL;

	pthread_mutex_lock(&p->lock);
	if (p->n_free) {
		buf = p->base + (size_t)p->free[--p->n_free] * PAGE_SIZE;
		if (p->n_pages - p->n_free > p->in_use_peak)
			p->in_use_peak = p->n_pages - p->n_free;
	}
	pthread_mutex_unlock(&p->lock);
	return buf;
}

void pool_put(struct pool *p, void *buf)
{
	pthread_mutex_lock(&p->lock);
	p->free[p->n_free++] = (uint32_t)(((uint8_t *)buf - p->base) / PAGE_SIZE);
	pthread_mutex_unlock(&p->lock);
}

size_t pool_free_pages(struct pool *p)
{
	size_t n;

	pthread_mutex_lock(&p->lock);
	n = p->n_free;
	pthread_mutex_unlock(&p->lock);
	return n;
}

size_t pool_in_use(struct pool *p)
{
	size_t n;

	pthread_mutex_lock(&p->lock);
	n = p->n_pages - p->n_free;
	pthread_mutex_unlock(&p->lock);
	return n;
}

size_t pool_take_peak(struct pool *p)
{
	size_t peak;

	pthread_mutex_lock(&p->lock);
	peak = p->in_use_peak;
	p->in_use_peak = p->n_pages - p->n_free;
	pthread_mutex_unlock(&p->lock);
	return peak;
}
