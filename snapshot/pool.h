/*
 * pool.h - 4 KiB copy buffers for copy-on-write, allocated once and kept.
 */
#ifndef CCVM_POOL_H
#define CCVM_POOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct pool {
	uint8_t *base;
	size_t n_pages;
	uint32_t *free;     /* stack of free page indices */
	size_t n_free;
	size_t in_use_peak;
	pthread_mutex_t lock;
};

/* Reserve @bytes of huge-page-backed buffers and touch them now, so the fault path
 * never pays for a first touch. Returns 0 or -errno. */
int pool_init(struct pool *p, size_t bytes);
void pool_fini(struct pool *p);

/* A 4 KiB buffer, or NULL when the pool is exhausted. */
void *pool_get(struct pool *p);
void pool_put(struct pool *p, void *buf);
size_t pool_in_use(struct pool *p);
/* Buffers free now. */
size_t pool_free_pages(struct pool *p);
/* Most buffers in use at once since the last call; resets the mark. */
size_t pool_take_peak(struct pool *p);

#endif
